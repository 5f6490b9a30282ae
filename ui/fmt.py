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
