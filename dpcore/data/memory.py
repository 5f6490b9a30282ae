"""Memory that large releases free, handed back to the operating system between phases.

pyarrow's memory pool (mimalloc or jemalloc) and the C library's ``malloc`` keep memory that was
freed for reuse, so a process's resident size stays at its high-water mark: at 8 million census
blocks, the input table, its text columns and the budget keys' arrays, freed before the mechanism
runs, still count towards the peak while the mechanism allocates its own.  :func:`release_unused`
asks both to return what is free (it changes no result, only the resident size).
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["release_unused"]


def release_unused() -> None:
    """Return memory freed by pyarrow's pool and by ``malloc`` (glibc's ``malloc_trim``) to the
    operating system; a no-op where neither applies.

    >>> release_unused()
    """
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except (ImportError, AttributeError):  # no pyarrow, or a pool without the call
        pass
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
