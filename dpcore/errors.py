"""Errors a person can cause and fix.

Every error raised for bad input, a bad parameter or an exhausted budget is a
:class:`DPCoreError` whose message says what is wrong *and* how to fix it.  The
app shows the message and keeps the session; the CLI prints it on one line and
exits non-zero.  Anything else escaping dpcore is a bug.
"""

from __future__ import annotations


class DPCoreError(Exception):
    """A problem the user can fix; ``str(err)`` names the problem and the fix."""


class InputError(DPCoreError):
    """An input file or table cannot be used (format, columns, values)."""


class ParameterError(DPCoreError):
    """A parameter (bounds, grid, epsilon, mechanism option) is invalid."""


class BudgetError(DPCoreError):
    """A release would spend more privacy budget than the dataset's cap allows."""


class StorageError(DPCoreError):
    """The budget database or its key file cannot be used (full disk, held lock, damage, a replaced
    or missing key file); the message names the file and what to do (free space, wait, restore)."""
