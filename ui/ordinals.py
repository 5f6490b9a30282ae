"""The public values of ordinal attributes (age bands, income bands), typed by the curator.

A census release has one column per value of each ordinal attribute.  Taken from the data, a
value nobody has would vanish from the release and its columns, and that absence is not
protected; so the app asks for the public list of values, in order, and refuses data values
outside it (:meth:`dpcore.areas.census_tables.CensusTable.from_frame` with ``require_orders``).
The text is parsed by :func:`dpcore.areas.census_tables.parse_ordinal_order`, the parser of the
command line's ``--ordinal-order``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from dpcore.areas.census_tables import BINS_TYPED, ORDER_SEP, parse_ordinal_order
from dpcore.errors import DPCoreError


def orders_input(ordinals: Sequence[str], suggested: Mapping[str, Sequence[str]] | None = None,
                 key: str = "census_order") -> dict[str, tuple[str, ...]] | None:
    """One box per ordinal attribute for its public values in order; ``None`` (with a message)
    until every box holds a valid list.  ``suggested`` pre-fills a box with a list that is public
    anyway (the made-up demo's bands), never with values read from the curator's data."""
    suggested = suggested or {}
    orders: dict[str, tuple[str, ...]] = {}
    missing: list[str] = []
    ok = True
    for o in ordinals:
        text = st.text_input(
            f"Public values of '{o}', in order, separated by {ORDER_SEP}", value=ORDER_SEP.join(suggested.get(o, ())),
            key=f"{key}_{o}", placeholder=f"e.g. 0-17{ORDER_SEP}18-64{ORDER_SEP}65+",
            help="Every value of the attribute, from a public source (the survey's code book), including values "
                 "nobody may have: each becomes a column of the release with noise. A value in the data that is "
                 "not in this list is refused.")
        if not text.strip():
            missing.append(o)
            continue
        try:
            orders[o] = parse_ordinal_order(text, o)
        except DPCoreError as e:
            st.error(str(e))
            ok = False
    if missing:
        st.info(f"Type the public values of {', '.join(map(repr, missing))} to continue. They are not taken from "
                "the data: a value nobody has would disappear from the release, and that absence is not protected.")
    return orders if ok and not missing else None


def public_orders(orders: Mapping[str, Sequence[str]]) -> dict[str, object]:
    """The keyword arguments of :meth:`~dpcore.areas.census_tables.CensusTable.from_frame` for
    lists typed here: every ordinal needs one, and the record says the curator typed them."""
    return {"ordinal_orders": dict(orders), "orders_source": BINS_TYPED, "require_orders": True}
