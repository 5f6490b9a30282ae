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
