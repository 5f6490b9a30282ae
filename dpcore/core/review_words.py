"""Plain words for ``review.html``: the record's codes said as sentences a disclosure officer reads.

``review.html`` (:func:`dpcore.core.review.review_html`) is read by someone who signs a release and
is not a differential-privacy expert.  The record (``release.json``) keeps its machine-readable
fields; this module says them in words, plain words first and the symbol second (the budget as
"ε = 1 (pure differential privacy)", the unit of privacy as a sentence, levels by name, numbers
with thousands separators and ε with two significant digits).  It reads the record only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dpcore.privacy.budget import SUPERSCRIPT, SYMBOL, two_significant

__all__ = ["KIND_WORDS", "advice_level", "budget_sentence", "cost_words", "horizon_words", "invariant_words", "kind_words",
           "level_names", "neighbour_words", "number", "unit_sentence"]

#: What each kind of release is, in the words of the app (points, counts over areas, trips between areas).
KIND_WORDS = {"points": "points", "hierarchy": "counts over areas", "census": "counts over areas",
              "od": "trips between areas"}
_DEFINITION = {"pure": "pure differential privacy", "zcdp": "zero-concentrated differential privacy, zCDP"}


def kind_words(kind: Any) -> str:
    """The kind of data in words.

    >>> kind_words("od"), kind_words("census")
    ('trips between areas', 'counts over areas')
    """
    return KIND_WORDS.get(str(kind), str(kind))


def number(x: Any) -> str:
    """A count or measure for people: whole numbers with thousands separators, others to two
    significant digits (:func:`dpcore.privacy.budget.two_significant`).

    >>> number(22911), number(3.68553), number(0.000034), number(None)
    ('22,911', '3.7', '3.4×10⁻⁵', '—')
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "—" if x is None else str(x)
    if isinstance(x, int) or (math.isfinite(x) and float(x).is_integer() and abs(x) >= 1):
        return f"{int(x):,}"
    return two_significant(float(x))


def _delta(delta: float) -> str:
    """δ as a power of ten where it is one (10⁻⁸), else to two significant digits."""
    if delta > 0:
        k = round(math.log10(delta))
        if math.isclose(delta, 10.0 ** k, rel_tol=1e-9):
            return "10" + str(k).translate(SUPERSCRIPT)
    return two_significant(delta)


def cost_words(cost: Mapping[str, Any] | None, approx: Mapping[str, float] | None = None) -> str:
    """A privacy cost (``{"definition", "value"}``) in words, with zCDP's (ε, δ) reading when given.

    >>> cost_words({"definition": "pure", "value": 1.0})
    'ε = 1 (pure differential privacy)'
    >>> cost_words({"definition": "zcdp", "value": 0.5}, {"epsilon": 4.23, "delta": 1e-8})
    'ρ = 0.5 (zero-concentrated differential privacy, zCDP; about ε = 4.2 at δ = 10⁻⁸)'
    """
    if not cost or cost.get("definition") not in SYMBOL:
        if approx and "epsilon" in approx:
            return (f"ε = {two_significant(approx['epsilon'])}, δ = {_delta(approx.get('delta', 0.0))} "
                    "(approximate differential privacy)")
        return "not stated (see release.json)"
    d = str(cost["definition"])
    words = f"{SYMBOL[d]} = {two_significant(float(cost['value']))} ({_DEFINITION[d]}"
    if d == "zcdp" and approx and "epsilon" in approx and "delta" in approx:
        words += f"; about ε = {two_significant(approx['epsilon'])} at δ = {_delta(approx['delta'])}"
    return words + ")"


def budget_sentence(ledger: Mapping[str, Any]) -> str:
    """The budget of the data set a release was charged to, in words (a release charged to none: the
    record's note, as a sentence).

    >>> budget_sentence({"accounted": True, "cap": {"definition": "pure", "value": 3.0}, "spent": 1.0,
    ...                  "remaining": 2.0, "entries": [{}]})
    'Charged to the privacy budget of this data set: ε = 3 in all; ε = 1 spent so far (this release included), ε = 2 left, over 1 release.'
    """
    if not ledger.get("accounted"):
        note = str(ledger.get("note") or "This release was charged to no budget.")
        return note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")
    cap = ledger.get("cap") or {}
    sym = SYMBOL.get(str(cap.get("definition")), "budget")
    n = len(ledger.get("entries", []))

    def amount(v: Any) -> str:
        return f"{sym} = {two_significant(float(v))}" if isinstance(v, (int, float)) else f"{sym}: not stated"

    return (f"Charged to the privacy budget of this data set: {amount(cap.get('value'))} in all; "
            f"{amount(ledger.get('spent'))} spent so far (this release included), {amount(ledger.get('remaining'))} "
            f"left, over {n:,} release{'' if n == 1 else 's'}.")


def neighbour_words(relation: Any) -> str:
    """The neighbouring relation (a code or already words) as the end of a sentence.

    >>> neighbour_words("replace")
    'one person is replaced by another (so the total number is public)'
    >>> neighbour_words("add or remove one person")
    'one person is added to or removed from the data'
    """
    text = str(relation or "")
    if text == "replace":
        return "one person is replaced by another (so the total number is public)"
    said = re.fullmatch(r"add or remove (one .+)", text)
    if said:
        return f"{said.group(1)} is added to or removed from the data"
    return "one such unit is added to or removed from the data" if text in ("", "add_remove") else text


def unit_sentence(unit: Any) -> str:
    """The unit of privacy as a sentence: the record's words, or an O/D unit's fields
    (``max_trips``: trips kept per person; ``distinct``: whether a person's trips are counted once
    per pair of areas) said in words.

    >>> unit_sentence({"max_trips": 3, "distinct": True, "description": "…"})
    'one person, who may make up to 3 trips, each counted once (on a different pair of areas)'
    >>> unit_sentence({"max_trips": 1, "distinct": True})
    'one person, who may make up to 1 trip, counted once'
    >>> unit_sentence("one record (point)")
    'one record (point)'
    """
    if isinstance(unit, Mapping):
        m = unit.get("max_trips")
        if isinstance(m, int) and not isinstance(m, bool):
            if m == 1:
                return "one person, who may make up to 1 trip, counted once"
            return (f"one person, who may make up to {m:,} trips, " +
                    ("each counted once (on a different pair of areas)" if unit.get("distinct")
                     else "several of them possibly between the same pair of areas"))
        if isinstance(unit.get("label"), str):
            return unit["label"]
        if isinstance(unit.get("description"), str):
            return unit["description"]
        return "stated in release.json"
    return str(unit) if unit else "not stated (see release.json)"


def _label(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping):
        for k in ("label", "name", "period", "start"):
            if isinstance(v.get(k), str):
                return v[k]
    return None


def horizon_words(key: str, value: Any) -> str:
    """A series' horizon (the record's ``horizon``, ``periods`` or ``n_periods``) in words.

    >>> horizon_words("horizon", 52), horizon_words("periods", ["2024-01", "2024-02", "2024-03"])
    ('52 periods', '3 periods (2024-01 to 2024-03)')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,} period{'' if value == 1 else 's'}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        first, last = (_label(value[0]), _label(value[-1])) if value else (None, None)
        span = f" ({first} to {last})" if first and last and len(value) > 1 else (f" ({first})" if first else "")
        return f"{len(value):,} period{'' if len(value) == 1 else 's'}{span}"
    if isinstance(value, Mapping):
        for k in ("periods", "n_periods", "length", "n"):
            if k in value:
                return horizon_words(k, value[k])
    return f"a series of periods (its {key} is stated in release.json)"


def invariant_words(key: str, value: Any) -> Iterator[tuple[bool, str]]:
    """The quantities a release publishes exactly (its invariants), one sentence each, with whether
    the sentence is about the total (a record may state its total under more than one key: said once).

    >>> list(invariant_words("invariants", {"total": 440}))
    [(True, 'The total is published exactly (not noisy): 440.')]
    >>> list(invariant_words("invariants", [{"level": "state", "value": 1234}]))
    [(False, 'The count of state is published exactly (not noisy): 1,234.')]
    """
    if key == "total_public":
        yield True, "The total is published exactly (not noisy)."
    elif isinstance(value, Mapping):
        for k, v in value.items():
            what = "The total" if k == "total" else f"The {k}"
            yield k == "total", (f"{what} is published exactly (not noisy): {number(v)}." if isinstance(v, (int, float))
                                 else f"{what} is published exactly (not noisy); see release.json.")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping) and "value" in item:
                what = f"The count of {item['level']}" if "level" in item else "A count"
                yield False, f"{what} is published exactly (not noisy): {number(item['value'])}."
            else:
                yield False, "A quantity is published exactly (not noisy); see release.json."
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield True, f"The total is published exactly (not noisy): {number(value)}."
    else:
        yield False, "A quantity is published exactly (not noisy); see release.json."


def _od_level_names(rec: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for lv in (rec.get("tree") or {}).get("levels", []):
        o, d = lv.get("origin_level"), lv.get("destination_level")
        if not (isinstance(o, str) and isinstance(d, str) and isinstance(lv.get("name"), str)):
            continue
        o, d = ("the whole area" if x == "total" else f"each {x}" for x in (o, d))
        out[lv["name"]] = f"trips from {o} to {d} ({lv['name']} in release.csv)"
    return out


def _points_level_names(rec: Mapping[str, Any], sizes: Mapping[str, tuple[float, float]]) -> dict[str, str]:
    out = {}
    for name, (ew, ns) in sizes.items():
        cells = f"cells of about {_km(ew)} × {_km(ns)} km" if ew > 0 and ns > 0 else "cells of the partition"
        out[name] = f"level {name} ({cells})"
    return out


def _km(x: float) -> str:
    return two_significant(x) if x < 100 else f"{round(x):,}"


def level_names(rec: Mapping[str, Any], levels: Sequence[str],
                sizes: Mapping[str, tuple[float, float]] | None = None) -> dict[str, str]:
    """Each level of ``release.csv`` said as what it is: an O/D table as the areas its trips go
    between, a points level as its cells' size (``sizes``: level -> median east-west and
    north-south size in km, from the release's own rectangles), an area level by its name.

    >>> level_names({"kind": "points"}, ["8"], {"8": (1.23, 0.9)})["8"]
    'level 8 (cells of about 1.2 × 0.9 km)'
    """
    kind = rec.get("kind")
    named = (_od_level_names(rec) if kind == "od" else _points_level_names(rec, sizes or {}) if kind == "points"
             else {})
    out = {}
    for name in levels:
        if name in named:
            out[name] = named[name]
        elif re.fullmatch(r"\d+", name):
            out[name] = f"level {name}"
        else:
            out[name] = name
    return out


def advice_level(rec: Mapping[str, Any], name: str) -> str:
    """"Use at ... or coarser": the level as that sentence names it (:func:`level_names`' words).

    >>> advice_level({"kind": "hierarchy"}, "county"), advice_level({"kind": "points"}, "level 8 (cells of …)")
    ('level county', 'level 8 (cells of …)')
    """
    if name.startswith("level "):
        return name
    if rec.get("kind") == "od":
        return f"the table of {name}"
    return f"level {name}"
