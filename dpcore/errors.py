"""Errors a person can cause and fix.

Every error raised for bad input, a bad parameter or an exhausted budget is a
:class:`DPCoreError` whose message says what is wrong *and* how to fix it.  The
app shows the message and keeps the session; the CLI prints it on one line and
exits non-zero.  Anything else escaping dpcore is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: The one marker of a message that carries numbers read from the private data (a count of rows, a
#: row number, a file's size, a value of a row): such a message is for the curator, who must act on
#: it, and not for a pipeline's log that others read (UX.md: curator-only views carry a visible
#: "not for publication" marker; DESIGN.md privacy rules 1 and 5).  The command line prints it on
#: stderr at the front of its line; the app shows it as it is.
CURATOR_ONLY = "curator only, not for publication: "


def curator_only(text: str) -> str:
    """``text`` marked as curator-only: :data:`CURATOR_ONLY` once, at the front (a marker inside it,
    from a wrapped message, moves there).  Every message that names a number of the private data
    is built through this function, so that the marker has one spelling.

    >>> curator_only("Column 'lat' has 2 values outside -90..90 (data rows 3, 7).")
    "curator only, not for publication: Column 'lat' has 2 values outside -90..90 (data rows 3, 7)."
    >>> curator_only("'t.csv': " + curator_only("3 rows have no code."))
    "curator only, not for publication: 't.csv': 3 rows have no code."
    """
    return CURATOR_ONLY + text.replace(CURATOR_ONLY, "")


def curator_only_if_numbered(text: str, own: Iterable[str] = ()) -> str:
    """``text`` (a library's error about the private data: a parser's, an engine's) marked
    curator-only (:func:`curator_only`) when it holds a digit outside ``own``, the source's own paths
    and label: such texts name a file's line, a row count (``EOF inside string starting at row
    1501``) or quote a row's value (``'12/05/2024'``), numbers of the private data.  Only ``own``
    names are left out before looking, where they stand whole (not inside a longer word or number),
    and only names holding a letter: a name like ``2024`` could equally be a value, so it counts.

    >>> curator_only_if_numbered("EOF inside string starting at row 1501")
    'curator only, not for publication: EOF inside string starting at row 1501'
    >>> curator_only_if_numbered('No files found that match "/d/2024/p.csv"', ["/d/2024/p.csv"])
    'No files found that match "/d/2024/p.csv"'
    >>> curator_only_if_numbered("Could not convert string '12/05/2024' to DOUBLE", ["/d/p.csv"])
    "curator only, not for publication: Could not convert string '12/05/2024' to DOUBLE"
    """
    bare = text
    for name in sorted({n for n in own if any(ch.isalpha() for ch in n)}, key=len, reverse=True):
        bare = re.sub(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", "", bare)
    return curator_only(text) if re.search(r"\d", bare) else text


class DPCoreError(Exception):
    """A problem the user can fix; ``str(err)`` names the problem and the fix.  A message that holds
    a curator-only part (:func:`curator_only`, e.g. a parser's row number wrapped in a sentence) is
    marked as a whole, at its front.

    >>> str(DPCoreError("Cannot read 'a.csv': " + curator_only("data row 3 has 4 values") + "."))
    "curator only, not for publication: Cannot read 'a.csv': data row 3 has 4 values."
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and CURATOR_ONLY in args[0]:
            args = (curator_only(args[0]), *args[1:])
        super().__init__(*args)


class InputError(DPCoreError):
    """An input file or table cannot be used (format, columns, values)."""


class ParameterError(DPCoreError):
    """A parameter (bounds, grid, epsilon, mechanism option) is invalid."""


class BudgetError(DPCoreError):
    """A release would spend more privacy budget than the dataset's cap allows."""


class StorageError(DPCoreError):
    """The budget database or its key file cannot be used (full disk, held lock, damage, a replaced
    or missing key file); the message names the file and what to do (free space, wait, restore)."""

