"""Size limits on what is read whole or in place: named settings with defaults (issue 18, item 6).

A table or boundary file read into memory needs several times its size (pandas, GeoPandas), and
a folder or glob of files read where they are can be any number of files.  These limits refuse
such inputs *before* they are parsed, with a message that states the size, the limit and the
setting that changes it.  Each limit is an environment variable read when it is checked, so a
deployment sets it once at start-up:

========================== =========================================== =========
setting                    what it bounds                              default
========================== =========================================== =========
``DPCORE_MAX_TABLE_BYTES`` a table (CSV, Parquet, GeoJSON points) read 1 GB
                           whole into memory
``DPCORE_MAX_BOUNDARY_BYTES`` a boundary file read whole               1 GB
``DPCORE_MAX_SOURCE_FILES``  files of one folder or glob read in place 10,000
``DPCORE_MAX_SOURCE_BYTES``  their total size                          100 GB
========================== =========================================== =========
"""

from __future__ import annotations

import os

from dpcore.errors import InputError, curator_only

__all__ = ["LIMITS", "check_bytes", "limit"]

#: Setting name -> (default, what it bounds).
LIMITS: dict[str, tuple[int, str]] = {
    "DPCORE_MAX_TABLE_BYTES": (1_000_000_000, "a table read into memory"),
    "DPCORE_MAX_BOUNDARY_BYTES": (1_000_000_000, "a boundary file"),
    "DPCORE_MAX_SOURCE_FILES": (10_000, "the files of one folder or pattern"),
    "DPCORE_MAX_SOURCE_BYTES": (100_000_000_000, "the total size of one folder or pattern"),
}


def limit(name: str) -> int:
    """The value of the setting ``name`` (its environment variable, else its default; a value that
    is not a positive whole number falls back to the default).

    >>> limit("DPCORE_MAX_SOURCE_FILES") >= 1
    True
    """
    default = LIMITS[name][0]
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 1e9 else f"{n / 1e9:,.2f} GB"


def check_bytes(n_bytes: int, name: str, label: str, fix: str = "") -> None:
    """Refuse ``n_bytes`` above the limit ``name`` before anything is parsed.

    >>> check_bytes(10, "DPCORE_MAX_TABLE_BYTES", "'a.csv'")
    """
    cap = limit(name)
    if n_bytes > cap:
        raise InputError(
            curator_only(f"{label} is {_size(n_bytes)}, more than the {_size(cap)} allowed for {LIMITS[name][1]} "
            f"(setting {name})." + (f" {fix}" if fix else "")
            + " Raise the setting when the app or command line starts if this machine has the memory."))
