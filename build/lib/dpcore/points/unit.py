"""The unit of privacy of a points release, derived in one place for the app, the CLI and the library.

One record (a point) is protected by default; with a person column, one person whose
contribution is capped at ``user_cap`` records, so the sensitivity of every count scales with the
cap (the user-level DP of Wilson et al., "Differentially Private SQL with Bounded User
Contribution", PoPETs 2020, Sec. 3).
"""

from __future__ import annotations

from dpcore.privacy.units import Unit

__all__ = ["points_unit"]


def points_unit(user_cap: int | None = None) -> Unit:
    """One person contributing at most ``user_cap`` points (a person column), else one point.

    >>> points_unit(), points_unit(5)
    (Unit(entity='record', cap=None, neighbour='add_remove'), Unit(entity='person', cap=5, neighbour='add_remove'))
    """
    return Unit("person", cap=int(user_cap)) if user_cap else Unit("record")
