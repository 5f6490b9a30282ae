"""The unit of privacy of an origin/destination release, derived in one place for the app, the CLI
and the library.

One trip by default (every trip taken to be a different person); with a person column, one person
making at most ``max_trips`` trips (Boninsegna & Silvestri, "Differentially private release of
hierarchical origin/destination data with a TopDown approach", PoPETs 2025, Sec. 3).  O/D
neighbours keep the flows' vocabulary: "bounded" (replace one; the total is public) or "unbounded"
(add or remove one).
"""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.privacy.units import Unit

__all__ = ["od_unit"]


def od_unit(neighbour: str, max_trips: int, persons: bool = False) -> Unit:
    """One person making at most ``max_trips`` trips when a person column bounds them (``persons``),
    else one trip; "bounded" neighbours replace one, "unbounded" add or remove one.

    >>> od_unit("bounded", 3, persons=True)
    Unit(entity='person', cap=3, neighbour='replace')
    >>> od_unit("unbounded", 1)
    Unit(entity='record', cap=None, neighbour='add_remove')
    """
    if neighbour not in ("bounded", "unbounded"):
        raise ParameterError("Neighbours are 'bounded' (replace one person; total public) or 'unbounded' "
                             "(add or remove one person).")
    n = "replace" if neighbour == "bounded" else "add_remove"
    if persons or max_trips > 1:
        return Unit("person", cap=max_trips, neighbour=n)
    return Unit("record", neighbour=n)
