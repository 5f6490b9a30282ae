"""The unit of privacy of an area release (a hierarchy of counts or a census table), derived in one
place for the app, the CLI and the library.

One counted record (a person) is protected, under add/remove neighbours (the total is noised) or
replace-one neighbours (the total is public; Kifer & Machanavajjhala, "No Free Lunch in Data
Privacy", SIGMOD 2011, Sec. 2 for the two definitions).
"""

from __future__ import annotations

from dpcore.errors import ParameterError
from dpcore.privacy.units import Unit

__all__ = ["census_unit", "check_neighbour", "hierarchy_unit", "unit_of_privacy_words"]


def check_neighbour(neighbour: str) -> None:
    """Refuse a neighbour relation other than ``"add_remove"`` (the total is noised) and ``"replace"``
    (the total is public), for the unit and for the plan of a hierarchy release alike."""
    if neighbour not in ("add_remove", "replace"):
        raise ParameterError("Neighbours are 'add_remove' (total noised) or 'replace' (total public).")


def hierarchy_unit(neighbour: str = "add_remove", statistic: str = "count", *, person_once: bool = False) -> Unit:
    """The unit of privacy of a hierarchy release: one record, added/removed or replaced.

    ``person_once``: the curator confirms that each person is counted once in the table (one row per
    person, or counts in which nobody appears twice); one record is then one person, and the release
    protects ``one person`` (contribution 1, the same noise), so it may draw on a person-level
    population budget (issue 26 item 15).  Without the confirmation a count table protects one
    counted record only.

    Group-size histograms (``statistic="group_sizes"``) are charged as replace-one whatever the
    neighbours they are computed under: they publish the exact number of groups, so they protect a
    person's membership changes with that total public (see :mod:`dpcore.areas.kind`).

    >>> hierarchy_unit("add_remove", "group_sizes").neighbour
    'replace'
    """
    check_neighbour(neighbour)
    replace = neighbour == "replace" or statistic == "group_sizes"
    return Unit("person" if person_once else "record", neighbour="replace" if replace else "add_remove")


def census_unit(*, person_once: bool = False) -> Unit:
    """The unit of privacy of a census-table release: one counted record, added or removed; one
    person when the curator confirms each person is counted once (``person_once``, as for
    :func:`hierarchy_unit`).

    The same unit as a hierarchy release of the table (:func:`hierarchy_unit`): both kinds key the
    table's budget alike, so they must protect the same unit to share it.

    >>> census_unit() == hierarchy_unit("add_remove")
    True
    >>> census_unit(person_once=True).label()
    'one person, add or remove'
    """
    return Unit("person" if person_once else "record")


def unit_of_privacy_words(unit: Unit | None, person_words: str) -> str:
    """The record's ``unit_of_privacy`` of an area release: ``person_words`` (the unit as one person)
    when the release protects one person, or when its unit is not known (``None``); for a release of
    one counted record (the curator did not confirm each person is counted once, issue 26 item 15)
    the same words of one counted record, so that the record claims no more than its charge.

    >>> unit_of_privacy_words(Unit("person"), "one person (add or remove)")
    'one person (add or remove)'
    >>> unit_of_privacy_words(Unit(), "one person (add or remove)")
    'one counted record (add or remove); one person only where each person is counted once, which was not confirmed'
    """
    if unit is None or unit.entity != "record" or not person_words.startswith("one person ("):
        return person_words
    return ("one counted record " + person_words.removeprefix("one person ")
            + "; one person only where each person is counted once, which was not confirmed")
