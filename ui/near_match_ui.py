"""The question before a fresh budget for near-identical data (issue 26 item 14).

When uploaded data would open a new budget but closely matches data whose budget has been spent
(:mod:`dpcore.privacy.near_match`: the same columns, about the same size and extent), the Release
step asks whether it is the same population before anything is released, and records the answer.
Nothing about either data set is shown: only that they match closely.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dpcore.privacy import key_aliases, near_match
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.ledger_store import StoredLedger
from ui import clicks, state

#: What the match is made of, per kind (nothing about either data set is shown).
_ALIKE = {"points": "the same columns, about the same size and extent",
          "areas": "the same levels, about the same total and number of areas",
          "flows": "the same areas, about the same number of trips and of pairs with trips"}

#: The answers' button labels.
SAME = "Same people: draw on that budget"
OTHER = "Other people: a budget of its own"


def answered(kind: str, fp: str, profile: near_match.Profile | None, led: Ledger) -> bool:
    """True when the release may go ahead; otherwise the question is shown (and False returned).

    Asked only for real data (not the demo) whose budget is unspent; the profile of data that goes
    ahead is kept (as keyed buckets) for the next upload."""
    if profile is None or not isinstance(led, StoredLedger) or led.store.temporary or state.is_demo(kind, fp):
        return True
    store = led.store
    data_key = store.data_key(kind, fp)
    checked = st.session_state.setdefault("near_match_checked", {})
    if data_key not in checked:
        found = near_match.matches(store, data_key, profile) if not near_match.spent(store, led.dataset) else []
        checked[data_key] = found
        if not found:
            near_match.remember(store, store.resolve(key_aliases.resolve(store, data_key)), profile)
    found = checked[data_key]
    if not found:
        return True
    st.warning("**Is this the same population as data released before?** This data closely matches data whose "
               f"budget has already been spent ({_ALIKE.get(kind, _ALIKE['points'])}), but it is not "
               "the same file, so it would start a new budget. If it is the same people (say, the same file with "
               "a row dropped), its releases must draw on that budget. Your answer is recorded.")
    c1, c2 = st.columns(2)
    c1.button(SAME, key="near_match_same", on_click=clicks.atomic(_answer),
              args=(store, data_key, found, True, profile))
    c2.button(OTHER, key="near_match_other", on_click=clicks.atomic(_answer),
              args=(store, data_key, found, False, profile))
    return False


def _answer(store: Any, data_key: str, found: list[str], same: bool, profile: near_match.Profile) -> None:
    near_match.answer(store, data_key, found, same)
    near_match.remember(store, store.resolve(key_aliases.resolve(store, data_key)), profile)
    st.session_state.setdefault("near_match_checked", {})[data_key] = []
