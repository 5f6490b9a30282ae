"""Files read where they are, from the app: only under one allowed folder (issue 18, item 5).

The command line reads any path its user names.  The app is different: whoever reaches it acts
with the permissions of the app's process, so "Files on this computer" is **off** unless the
person who starts the app names one folder, the *data root*, in ``DPCORE_DATA_ROOT``.  Then

* a typed path is taken relative to the root (an absolute path must lie inside it); a ``..``
  component is refused, so a path or pattern cannot climb out;
* the typed path (for a pattern, its folder before the first wildcard) is resolved first and
  refused when it leads outside the root through a symbolic link, before any folder is listed;
* a folder or glob pattern is expanded under the root only, and stops past
  ``DPCORE_MAX_SOURCE_FILES`` files or ``DPCORE_MAX_SOURCE_BYTES`` bytes
  (:mod:`dpcore.data.limits`);
* every file found is resolved (``os.path.realpath``: symbolic links followed) and refused when
  it lies outside the root, so a link inside the root cannot lead out; the engines then open the
  resolved paths, not the links.

The Spark master is chosen from ``DPCORE_SPARK_MASTERS`` (comma-separated, default ``local[*]``
and ``local[2]``), never typed.  :func:`safe_message` takes the file's values out of an error
message before the app shows it.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from dpcore.data.engines.base import Source, _fmt
from dpcore.data.limits import limit
from dpcore.errors import InputError, ParameterError, curator_only

__all__ = ["DEFAULT_SPARK_MASTERS", "ROOT_ENV", "SPARK_MASTERS_ENV", "check_spark_master", "data_root",
           "safe_message", "source_under_root", "spark_masters"]

ROOT_ENV = "DPCORE_DATA_ROOT"
SPARK_MASTERS_ENV = "DPCORE_SPARK_MASTERS"
DEFAULT_SPARK_MASTERS = ("local[*]", "local[2]")
_GLOB = "*?["


def data_root(env: Mapping[str, str] | None = None) -> Path | None:
    """The allowed folder (resolved), or ``None`` when ``DPCORE_DATA_ROOT`` is not set (the
    feature is off).  A setting that names no folder is an error, not a silent "off"."""
    raw = (os.environ if env is None else env).get(ROOT_ENV, "").strip()
    if not raw:
        return None
    root = Path(os.path.realpath(Path(raw).expanduser()))
    if not root.is_dir():
        raise ParameterError(f"{ROOT_ENV} names no folder on this computer. Set it to the folder that holds the "
                             "data files, then start the app again.")
    return root


def _inside(path: str | Path, root: Path) -> bool:
    return Path(path) == root or root in Path(path).parents


def source_under_root(text: str, root: Path) -> Source:
    """The files named by ``text`` (a file, folder or glob pattern) under ``root``, resolved.

    Raises
    ------
    InputError
        A ``..`` component, a path or pattern outside the root, a file that resolves (through a
        symbolic link) outside it, nothing found, or more files or bytes than the limits allow.
    """
    text = str(text).strip()
    if not text:
        raise InputError("Name a file, a folder or a pattern inside the data folder.")
    given = Path(text)
    if ".." in given.parts:
        raise InputError("A path with '..' is not allowed: name a file, folder or pattern inside the data folder.")
    path = given if given.is_absolute() else root / given
    if not _inside(os.path.normpath(path), root):
        raise InputError(f"'{text}' is outside the data folder the app may read ({root}). Name a path inside it.")
    pattern = any(ch in text for ch in _GLOB)
    # the typed file or folder (a pattern's folder before its first wildcard), links followed:
    # refused before anything is listed, naming only what was typed
    fixed = Path(root, *itertools.takewhile(lambda part: not any(ch in part for ch in _GLOB),
                                            path.relative_to(root).parts)) if pattern else path
    target = os.path.realpath(fixed)
    if not _inside(target, root):
        what = "is a link to a file" if os.path.isfile(target) else "leads through a symbolic link to a folder"
        raise InputError(f"'{text}' {what} outside the data folder, which the app may not read. Copy the files "
                         "into the folder instead.")
    max_files = limit("DPCORE_MAX_SOURCE_FILES")
    if pattern:
        found: Iterable[Path] = (q for q in root.glob(str(path.relative_to(root))) if q.is_file())
    elif path.is_dir():
        found = (q for q in path.rglob("*") if q.is_file() and _fmt(q) is not None
                 and not any(part.startswith((".", "_")) for part in q.relative_to(path).parts))
    elif path.is_file() or path.is_symlink():
        found = [path]
    else:
        raise InputError(f"'{text}' does not exist in the data folder. Check the path.")
    items = list(itertools.islice(found, max_files + 1))
    if len(items) > max_files:
        raise InputError(f"'{text}' names more than {max_files:,} files (setting DPCORE_MAX_SOURCE_FILES). Name "
                         "fewer files, or raise the setting when the app starts.")
    if not items:
        raise InputError(f"No CSV or Parquet file matches '{text}' in the data folder. Check the path or pattern.")
    real = []
    for q in items:
        r = os.path.realpath(q)
        if not _inside(r, root):
            raise InputError(f"'{q.relative_to(root) if _inside(q, root) else q.name}' is a link to a file outside "
                             "the data folder, which the app may not read. Copy the file into the folder instead.")
        real.append(r)
    src = Source.from_path(sorted(set(real)))
    total, cap = src.n_bytes, limit("DPCORE_MAX_SOURCE_BYTES")
    if total > cap:
        raise InputError(curator_only(f"'{text}' holds {len(src.paths):,} files of {total / 1e9:,.2f} GB in all, more than the "
                         f"{cap / 1e9:,.2f} GB allowed (setting DPCORE_MAX_SOURCE_BYTES). Name fewer files, or raise "
                         "the setting when the app starts."))
    return Source(src.paths, src.fmt, text)


def spark_masters(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The Spark masters the app may use: ``DPCORE_SPARK_MASTERS`` (comma-separated), else
    ``local[*]`` and ``local[2]`` (Spark on this computer)."""
    raw = (os.environ if env is None else env).get(SPARK_MASTERS_ENV, "")
    masters = tuple(m.strip() for m in raw.split(",") if m.strip())
    return masters or DEFAULT_SPARK_MASTERS


def check_spark_master(master: str | None, env: Mapping[str, str] | None = None) -> str:
    """``master`` when it is on the allow-list, else a ParameterError."""
    allowed = spark_masters(env)
    if master not in allowed:
        raise ParameterError(f"This Spark master is not allowed here; choose one of {', '.join(allowed)} (setting "
                             f"{SPARK_MASTERS_ENV}).")
    return str(master)


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_EXAMPLES = re.compile(r"\s*\((?:e\.g\.|for example)[^()]*(?:\([^()]*\)[^()]*)*\)")
_ROW_VALUES = re.compile(r"(data rows? [\d, .…]+):[^)]*")


def safe_message(message: str, keep: Iterable[str] = ()) -> str:
    """``message`` without the values of the file it is about: example lists ``(e.g. …)`` and
    ``data rows 2, 5: 'abc', …`` lose their values, and a quoted text is replaced by ``'…'``
    unless it is in ``keep`` (the column names the curator chose, the path they typed).

    >>> safe_message("'p.csv' has 2 rows whose 'lat' or 'lon' is not a number (e.g. lat=abc, lon=1).",
    ...              keep=["p.csv", "lat", "lon"])
    "'p.csv' has 2 rows whose 'lat' or 'lon' is not a number."
    >>> safe_message("DuckDB could not read 'x': Could not convert string 'SECRET' to DOUBLE.", keep=["x"])
    "DuckDB could not read 'x': Could not convert string '…' to DOUBLE."
    """
    kept = {str(k) for k in keep}
    out = _EXAMPLES.sub("", message)
    out = _ROW_VALUES.sub(r"\1", out)
    return _QUOTED.sub(lambda m: m.group(0) if m.group(0)[1:-1] in kept else "'…'", out)
