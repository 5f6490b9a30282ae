"""The unit of privacy of an area release (a hierarchy of counts or a census table), derived in one
place for the app, the CLI and the library.

One counted record (a person) is protected, under add/remove neighbours (the total is noised) or
replace-one neighbours (the total is public; Kifer & Machanavajjhala, "No Free Lunch in Data
Privacy", SIGMOD 2011, Sec. 2 for the two definitions).
"""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.privacy.units import Unit

__all__ = ["census_unit", "hierarchy_unit"]


def hierarchy_unit(neighbour: str = "add_remove", statistic: str = "count") -> Unit:
    """The unit of privacy of a hierarchy release: one record, added/removed or replaced.

    Group-size histograms (``statistic="group_sizes"``) are charged as replace-one whatever the
    neighbours they are computed under: they publish the exact number of groups, so they protect a
    person's membership changes with that total public (see :mod:`dpcore.areas.kind`).

    >>> hierarchy_unit("add_remove", "group_sizes").neighbour
    'replace'
    """
    if neighbour not in ("add_remove", "replace"):
        raise ParameterError("Neighbours are 'add_remove' (total noised) or 'replace' (total public).")
    replace = neighbour == "replace" or statistic == "group_sizes"
    return Unit("record", neighbour="replace" if replace else "add_remove")


def census_unit() -> Unit:
    """The unit of privacy of a census-table release: one counted record (person), added or removed.

    The same unit as a hierarchy release of the table (:func:`hierarchy_unit`): both kinds key the
    table's budget alike, so they must protect the same unit to share it.

    >>> census_unit() == hierarchy_unit("add_remove")
    True
    """
    return Unit("record")
