"""Numbers for people: thousands separators, ε with two significant digits."""

from __future__ import annotations

import math


def count(x: float) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:,.0f}"


def eps(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:.2g}"


def num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def plural(word: str, n: int = 2) -> str:
    """``region`` → ``regions``, ``county`` → ``counties``, ``census`` → ``censuses`` (n ≠ 1).

    >>> plural("county"), plural("district"), plural("zone", 1), plural("box")
    ('counties', 'districts', 'zone', 'boxes')
    """
    if n == 1 or not word:
        return word
    low = word.lower()
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


#: plain words for raw column names of public geography (shown as "county (COUNTYFP)")
PLAIN_LEVELS = {"STATEFP": "state", "COUNTYFP": "county", "TRACTCE": "tract", "BLKGRPCE": "block group",
                "GEOID": "area", "LocationID": "zone", "total": "total"}


def level_label(level: str, n: int = 1) -> str:
    """A level of areas in plain words, for every kind's pages and planners (issue 26 item 10):
    ``county (COUNTYFP)`` for a raw column name, else the name itself (pluralised for ``n`` ≠ 1).

    >>> level_label("COUNTYFP"), level_label("COUNTYFP", 3), level_label("district", 2), level_label("LocationID")
    ('county (COUNTYFP)', 'counties (COUNTYFP)', 'districts', 'zone (LocationID)')
    """
    plain = PLAIN_LEVELS.get(level)
    if plain is None or plain == level:
        return plural(level, n)
    return f"{plural(plain, n)} ({level})"


def sizes_line(levels: list[str], sizes: list[int]) -> str:
    """The areas per level, pluralised (:func:`level_label`), for the areas and O/D pages.

    >>> sizes_line(["region", "district", "COUNTYFP"], [4, 36, 1])
    '4 regions, 36 districts, 1 county (COUNTYFP)'
    """
    return ", ".join(f"{count(n)} {level_label(lv, n)}" for lv, n in zip(levels, sizes, strict=True))


#: how a stored release's summary keys read in History (``order`` is the files' order: not shown)
_SUMMARY_WORDS = {"mechanism": "Mechanism", "cost": "Budget", "grid": "Grid (rows x columns)", "params": "Parameters",
                  "levels": "Tables", "out": "Written to", "periods": "Periods", "unit": "Unit of privacy"}


def summary_lines(summary: dict) -> list[str]:
    """A stored release's summary as lines a curator reads (History), not raw JSON (issue 26 item 10).

    >>> summary_lines({"mechanism": "PrivTree", "cost": "ε = 0.5", "params": {"theta": 0, "fanout": 4},
    ...                "levels": ["total", "zone"], "order": ["release.csv"]})
    ['**Mechanism:** PrivTree', '**Budget:** ε = 0.5', '**Parameters:** theta 0, fanout 4', '**Tables:** total, zone']
    """
    def text(v: object) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{str(k).replace('_', ' ')} {text(x)}" for k, x in v.items()) or "none"
        if isinstance(v, list | tuple):
            return ", ".join(text(x) for x in v) or "none"
        return str(v)

    return [f"**{_SUMMARY_WORDS.get(k, str(k).replace('_', ' ').capitalize())}:** {text(v)}"
            for k, v in summary.items() if k != "order"]
