"""The target-error planner on a Plan step: "the error I can live with" -> the smallest budget.

One widget for every kind of data (points, areas, flows): the curator states, per level, the
error they can live with in plain words ("±50 points per released count, for 95 % of the
counts", or "within 10 % for counts of 1,000 or more"); :func:`dpcore.core.target.plan_for_targets`
proposes the smallest ε (or ρ) and, where the mechanism lets the levels be weighed, the split
over levels, from the same data-free error formulas the plan shows (no data is read).  "Use this
budget" hands the proposal to the kind's callback, which sets the release budget (and the split
parameters) in the session state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.core import target
from dpcore.core.mechanism import Mechanism
from dpcore.errors import DPCoreError
from dpcore.privacy.units import Unit
from ui import fmt

FINEST = "finest"
HOW = {"abs": "± a number", "rel": "within a percentage"}


def refusal(mechanism: Mechanism) -> str | None:
    """Why the planner cannot plan this mechanism from public inputs, or None."""
    return target.DATA_DEPENDENT.get((mechanism.kind, mechanism.name))


def split_params(proposal: target.Proposal) -> dict[str, Any]:
    """The parameters that carry the proposed split ({} when the mechanism's own split is kept)."""
    if proposal.split == "given" or "weights" not in proposal.params:
        return {}
    return {"split": proposal.params.get("split", "custom"), "weights": tuple(proposal.params["weights"])}


def _target_inputs(key: str, level: str, label: str, word: str) -> target.Target:
    """The widgets of one level's target; returns the Target (raises DPCoreError if it is not one)."""
    c1, c2, c3, c4 = st.columns([1.3, 1, 1, 1])
    how = c1.selectbox(f"Error at {label}", list(HOW), format_func=HOW.get, key=f"{key}_how_{level}")
    if how == "abs":
        half = c2.number_input(f"± how many {word}", min_value=1, value=50, step=5, key=f"{key}_abs_{level}",
                               help=f"Each released count may be off by at most this many {word}.")
        low = rel = None
    else:
        rel = c2.number_input("within (%)", min_value=0.1, max_value=100.0, value=10.0, step=1.0,
                              key=f"{key}_rel_{level}")
        low = c4.number_input(f"for counts of at least ({word})", min_value=1, value=1000, step=100,
                              key=f"{key}_min_{level}",
                              help="The noise does not depend on the count, so a count this large or larger "
                                   "is within the percentage whenever its error is within ± percentage × this.")
    share = c3.number_input("for this share of the counts (%)", min_value=50.0, max_value=99.9, value=95.0,
                            step=1.0, key=f"{key}_cov_{level}",
                            help="The chance that one count meets the error; about this share of the counts "
                                 "will meet it.")
    if how == "abs":
        return target.Target(level, float(half), share / 100)
    return target.Target(level, rel / 100 * float(low), share / 100, relative=rel / 100, at_least=float(low))


def planner(mechanism: Mechanism, domain: Any, definition: str, params: Mapping[str, Any],
            public: Mapping[str, Any], *, on_use: Callable[[target.Proposal], None], key: str,
            unit: Unit | None = None, levels: Sequence[str] = (), word: str = "people",
            finest_label: str = "each released count",
            level_label: Callable[[str], str] = str) -> target.Proposal | None:
    """The "Plan from the error you need" section; returns the proposal shown, or None.

    Parameters
    ----------
    mechanism
        The kind's mechanism (:func:`dpcore.catalog.get`).
    domain
        Its public domain (the grid, the hierarchy, the O/D pair).
    definition
        ``"pure"`` (the proposal is an ε) or ``"zcdp"`` (a ρ): the ledger's definition.
    params, public
        The mechanism's parameters and public inputs (``n_estimate`` ...), as the plan uses them.
    on_use
        Called with the proposal when "Use this budget" is pressed (a button callback: it may set
        widget keys), to set the release budget and the split parameters.
    key
        Prefix of the widget keys (one planner per kind).
    unit
        The unit of privacy (its cap scales the noise).
    levels
        Names of the plan's levels the curator may target besides the released counts.
    word
        What the counts count ("points", "people", "trips").
    level_label
        A level's name as the curator reads it (``county (COUNTYFP)`` for a raw column name): the
        levels are shown by it, never by their raw column names alone.
    """
    why = refusal(mechanism)
    if why is not None:
        st.info(f"The planner cannot propose a budget for {mechanism.title}: {why}", icon=":material/info:")
        return None
    st.caption("Say how far off the released counts may be; the planner proposes the smallest budget that "
               "meets it, from the same error formulas as the plan above (no data is used).")
    names = [FINEST] + [lv for lv in levels if lv.strip().lower() not in target.FINEST]
    chosen = st.multiselect("Levels with a target", names, default=[FINEST], key=f"{key}_levels",
                            format_func=lambda n: finest_label if n == FINEST else level_label(n))
    try:
        targets = [_target_inputs(key, lv, finest_label if lv == FINEST else level_label(lv), word) for lv in chosen]
    except DPCoreError as e:
        st.error(str(e))
        return None
    if not targets:
        st.caption("Choose at least one level to state an error for.")
        return None
    sig = repr((mechanism.kind, mechanism.name, _domain_key(domain), definition, sorted(params.items(), key=str),
                sorted(public.items()), unit, [t.to_dict() for t in targets]))
    ss = st.session_state
    if st.button("Propose a budget", key=f"{key}_propose"):
        try:
            with st.spinner("Searching for the smallest budget …"):
                prop = target.plan_for_targets(mechanism, domain, targets, definition=definition,
                                               params=dict(params), unit=unit, **dict(public))
            ss[f"{key}_proposal"] = (sig, prop, None)
        except DPCoreError as e:
            ss[f"{key}_proposal"] = (sig, None, str(e))
    stored = ss.get(f"{key}_proposal")
    if stored is None or stored[0] != sig:
        return None  # nothing proposed for these inputs yet
    _, prop, error = stored
    if prop is None:
        st.info(f"No budget to propose: {error}", icon=":material/info:")
        return None
    _show(prop, word, level_label, finest_label, names)
    # shown with two significant digits ("≈"); what "Use this budget" sets is the planner's own value
    # (rounded up to 4 significant digits, :attr:`~dpcore.core.target.Proposal.rounded`), which meets the targets
    sym = prop.cost.symbol
    st.button(f"Use this budget ({sym} ≈ {fmt.eps(prop.rounded)})", key=f"{key}_use", type="primary",
              on_click=on_use, args=(prop,),
              help=f"Sets the budget of this release to {sym} = {prop.rounded:g}"
                   + (" and the split over levels to the proposal's" if split_params(prop) else "")
                   + f": the planner's value, which meets your targets (about {fmt.eps(prop.rounded)} for reading). "
                     "Nothing is spent until you release.")
    return prop


def _domain_key(domain: Any) -> Any:
    """What identifies a domain for the proposal's signature: a hierarchy's fingerprint (its repr
    abbreviates long code arrays), a pair of them, or the domain itself (a grid)."""
    if isinstance(domain, tuple):
        return tuple(_domain_key(d) for d in domain)
    fp = getattr(domain, "fingerprint", None)
    return fp() if callable(fp) else domain


def _show(prop: target.Proposal, word: str, level_label: Callable[[str], str], finest_label: str,
          offered: Sequence[str]) -> None:
    sym = prop.cost.symbol
    how = {"given": "with the mechanism's own split", "independent": "with each level's share set to what it needs",
           "optimised": "with the split over levels chosen by the planner"}[prop.split]
    st.markdown(f"The smallest budget that meets your targets: **{sym} ≈ {fmt.eps(prop.rounded)}** ({how}).")
    rows = []
    for lv in prop.levels:
        rows.append({
            "level": level_label(lv.level),
            "counts": fmt.count(lv.n_counts),
            f"{sym} of the level": fmt.eps(lv.budget) if lv.budget is not None else "–",
            "error at the proposal": f"± {fmt.num(lv.half_width)} {word} for {lv.coverage:.0%}",
            "your target": lv.target.describe().replace(f" of {lv.target.level}", "") if lv.target else "–",
            "met": "–" if lv.met is None else ("yes" if lv.met else "no"),
        })
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    untargeted = untargeted_line(prop, level_label, finest_label, offered)
    if untargeted:
        st.caption(untargeted)
    for note in prop.notes:
        st.caption(note)
    if prop.row_notes:  # the plan's own words on levels whose error depends on the data (at the proposal)
        with st.expander("Levels whose error depends on the data"):
            for note in prop.row_notes:
                st.caption(note)


def untargeted_line(prop: target.Proposal, level_label: Callable[[str], str] = str,
                    finest_label: str = "each released count", offered: Sequence[str] | None = None) -> str | None:
    """One calm sentence when the proposal leaves levels without a target: their errors in the table are
    what this budget gives them, not aimed at (the planner meets the targets only); None when every
    level has a target.  ``offered``: the levels the curator may target (the others, e.g. the count of
    points that sizes a grid, are not named); None: every level.  A level that spends nothing (a total
    that is exact and public) is not named either.

    >>> from types import SimpleNamespace as NS
    >>> lv = lambda name, t: NS(level=name, target=t, budget=0.1)
    >>> prop = NS(levels=(lv("total", None), lv("region", None), lv("zone", NS(level="finest"))))
    >>> untargeted_line(prop, finest_label="each zone")
    'Only each zone was targeted. The errors shown for total and region are what this budget gives them; the planner did not aim at them. Add them to "Levels with a target" if their error matters.'
    >>> untargeted_line(prop, offered=["finest"]) is None
    True
    """
    aimed = [lv for lv in prop.levels if lv.target is not None]
    others = [level_label(lv.level) for lv in prop.levels  # not a level spending nothing (an exact, public total)
              if lv.target is None and (offered is None or lv.level in offered) and lv.budget is not None]
    if not others or not aimed:
        return None

    def names(xs: list[str]) -> str:
        return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]

    targeted = names([finest_label if lv.target.level.strip().lower() in target.FINEST else level_label(lv.level)
                      for lv in aimed])
    them = "it" if len(others) == 1 else "them"
    return (f"Only {targeted} {'was' if len(aimed) == 1 else 'were'} targeted. The errors shown for {names(others)} "
            f"are what this budget gives {them}; the planner did not aim at {them}. Add {them} to \"Levels with a "
            f"target\" if {'its' if len(others) == 1 else 'their'} error matters.")
