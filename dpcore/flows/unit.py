"""The unit of privacy of an origin/destination release, derived in one place for the app, the CLI
and the library.

One trip by default (every trip taken to be a different person); with a person column, one person
making at most ``max_trips`` trips (Boninsegna & Silvestri, "Differentially private release of
hierarchical origin/destination data with a TopDown approach", PoPETs 2025, Sec. 3).  Neighbours
are the units' own: ``"replace"`` (replace one; the total is public: the paper's bounded DP) or
``"add_remove"`` (add or remove one: its unbounded DP).
"""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.privacy.units import Unit

__all__ = ["check_neighbour", "od_unit"]


def od_unit(neighbour: str, max_trips: int, persons: bool = False) -> Unit:
    """One person making at most ``max_trips`` trips when a person column bounds them (``persons``),
    else one trip; ``"replace"`` neighbours replace one, ``"add_remove"`` add or remove one.

    >>> od_unit("replace", 3, persons=True)
    Unit(entity='person', cap=3, neighbour='replace')
    >>> od_unit("add_remove", 1)
    Unit(entity='record', cap=None, neighbour='add_remove')
    """
    check_neighbour(neighbour)
    if persons or max_trips > 1:
        return Unit("person", cap=max_trips, neighbour=neighbour)
    return Unit("record", neighbour=neighbour)


def check_neighbour(neighbour: str) -> None:
    """Refuse a neighbour relation other than ``"replace"`` and ``"add_remove"``."""
    if neighbour not in ("replace", "add_remove"):
        raise ParameterError(f"Unknown neighbour relation {neighbour!r}: 'replace' (replace one person; the total "
                             "is public) or 'add_remove' (add or remove one person).")
