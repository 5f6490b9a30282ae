"""The registry class: mechanisms listed by kind of data and name.

It holds no mechanism itself: the kind modules (``dpcore/points/kind.py``,
``dpcore/areas/kind.py``, ``dpcore/flows/kind.py``) register theirs into a :class:`Registry`,
and :mod:`dpcore.catalog` builds the full one, so the core never imports a kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from dpcore.core.mechanism import Mechanism
from dpcore.errors import ParameterError

__all__ = ["Registry", "normalise"]


T = TypeVar("T")


def lookup(table: Mapping[str, T], name: str, what: str) -> T:
    """The entry of a kind's mechanism table called ``name`` (:func:`normalise`), or a ParameterError
    that lists the available names.

    >>> lookup({"hay": 1}, "Hay", "hierarchy mechanism")
    1
    """
    key = normalise(name)
    if key not in table:
        raise ParameterError(
            f"Unknown {what} '{name}'. Available: {', '.join(table)} (run 'python -m dpcore mechanisms' for details)."
        )
    return table[key]


def normalise(name: str) -> str:
    """The registry key of a name: case, spaces and hyphens do not matter.

    >>> normalise(" TopDown-L2 ")
    'topdown_l2'
    """
    return str(name).strip().lower().replace("-", "_").replace(" ", "_")


class Registry:
    """Mechanisms by kind and name; unknown kinds and names are refused with the list of known ones.

    >>> from dpcore.core.mechanism import Plan
    >>> class Demo(Mechanism):
    ...     kind, name, title, summary, when_to_use, reference = "demo", "one", "One", "", "", ""
    ...     def _plan(self, domain, cost, params, unit, public): ...
    ...     def release(self, plan, aggregate, noise): ...
    >>> reg = Registry()
    >>> reg.register(Demo()).name
    'one'
    >>> reg.kinds(), reg.names("demo"), reg.get("demo", "ONE").title
    (['demo'], ['one'], 'One')
    >>> reg.get("demo", "two")
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: Unknown demo mechanism 'two'. Available: one.
    """

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, Mechanism]] = {}

    def register(self, mechanism: Mechanism) -> Mechanism:
        """Add ``mechanism`` under its kind and name; a second one with the same key is refused."""
        kind, key = normalise(mechanism.kind), normalise(mechanism.name)
        names = self._by_kind.setdefault(kind, {})
        if key in names:
            raise ParameterError(f"A {kind} mechanism called '{key}' is already registered.")
        names[key] = mechanism
        return mechanism

    def kinds(self) -> list[str]:
        """The kinds of data with at least one mechanism, in registration order."""
        return list(self._by_kind)

    def _kind(self, kind: str) -> dict[str, Mechanism]:
        key = normalise(kind)
        if key not in self._by_kind:
            raise ParameterError(
                f"Unknown kind of data '{kind}'. Available: {', '.join(self._by_kind) or 'none'}."
            )
        return self._by_kind[key]

    def names(self, kind: str) -> list[str]:
        """The mechanism names of ``kind``, in registration order."""
        return list(self._kind(kind))

    def get(self, kind: str, name: str) -> Mechanism:
        """The mechanism ``name`` of ``kind`` (case-insensitive; ``-`` reads as ``_``)."""
        names = self._kind(kind)
        key = normalise(name)
        if key not in names:
            raise ParameterError(
                f"Unknown {normalise(kind)} mechanism '{name}'. Available: {', '.join(names)}."
            )
        return names[key]

    def __iter__(self) -> Iterator[Mechanism]:
        for names in self._by_kind.values():
            yield from names.values()

    def __len__(self) -> int:
        return sum(len(n) for n in self._by_kind.values())

    def describe_all(self) -> dict[str, list[dict[str, Any]]]:
        """Per kind, the :meth:`Mechanism.describe` of every mechanism (for listings)."""
        return {kind: [m.describe() for m in names.values()] for kind, names in self._by_kind.items()}
