"""Points that stay in their files: a path on this computer (or a large upload saved to a private
temporary folder), opened with an aggregation engine (:mod:`dpcore.data.engines`).

The flow mirrors an upload: open (read the first rows, detect the columns), confirm the columns,
then one pass of the engine counts the points into the current grid with a progress bar.  The
engine runs again only when the grid, the bounds or the cap change.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dpcore.data import engines, file_access
from dpcore.data.code_tables import read_code_table
from dpcore.data.columns import detect_coordinate_columns, detect_user_column
from dpcore.data.engines import base as engine_rules
from dpcore.data.memory import release_unused
from dpcore.errors import DPCoreError, InputError
from ui import state

ENGINE_LABELS = {
    "auto": f"Automatic (DuckDB above {engines.threshold() / 1e6:,.0f} MB)",
    "numpy": "numpy: in memory (small files)",
    "duckdb": "DuckDB: streaming, out of core (any size)",
    "spark": "Spark: a cluster (or local mode)",
}


def path_picker() -> None:
    """The path, engine and (for Spark) master, and the Open button; off unless the app was started
    with an allowed data folder (:mod:`dpcore.data.file_access`)."""
    ss = st.session_state
    try:
        root = file_access.data_root()
    except DPCoreError as e:
        st.error(str(e))
        return
    if root is None:
        st.info(f"Reading files on this computer is off. To turn it on, start the app with {file_access.ROOT_ENV} "
                "set to the one folder it may read (e.g. DPCORE_DATA_ROOT=/data/pings ./run); files outside it "
                "are refused. Until then, upload the file, or use the command line.")
        return
    path = st.text_input(f"A CSV or Parquet file in {root}, a folder of them, or a pattern",
                         key=state.persistent("points_path", ""), placeholder="pings/  or  pings/*.parquet",
                         help="Relative to the data folder the app was started with; nothing outside it is read "
                              "(links leading out are refused).")
    state.store("points_path")
    c1, c2 = st.columns(2)
    eng = c1.selectbox("Engine", list(ENGINE_LABELS), format_func=ENGINE_LABELS.get,
                       key=state.persistent("points_engine", "auto"))
    state.store("points_engine")
    master = None
    if eng == "spark":
        masters = list(file_access.spark_masters())
        master = c2.selectbox("Spark master", masters, key=state.persistent("spark_master", masters[0]),
                              help="local[*] runs Spark on this computer. The masters offered are set when the app "
                                   f"starts ({file_access.SPARK_MASTERS_ENV}). Needs Java 17+ and PySpark.")
        state.store("spark_master")
    if st.button("Open", type="primary", disabled=not path.strip(), key="open_path"):
        try:
            src = file_access.source_under_root(path, root)
            if master is not None:
                file_access.check_spark_master(master)
        except DPCoreError as e:
            ss["path_error"] = str(e)
        else:
            open_path(src, eng, master, redact=True)
    if ss.get("path_error"):
        st.error(ss["path_error"])
        st.caption("Your earlier dataset and releases are kept.")


def open_path(path: str | engines.Source, engine: str, master: str | None, label: str | None = None,
              redact: bool = False) -> bool:
    """Read the first rows of ``path`` (or an already checked source) with the engine and detect the
    columns; errors are kept in the session (shown by the picker), never raised.  ``redact``: a file
    read in place, whose values error messages do not quote (:func:`file_access.safe_message`)."""
    ss = st.session_state
    try:
        src = path if isinstance(path, engines.Source) else engines.Source.from_path(path)
        if label:
            src = engines.Source(src.paths, src.fmt, label)
        name = engines.choose(engine, src.n_bytes)
        with st.spinner(f"Opening {src.label} with {name} …"):
            head = engines.get_engine(name, spark_master=master).head(src, 1000)
        lat, lon = detect_coordinate_columns(head)
        ss["path_open"] = {"src": src, "engine": name, "master": master, "head": head,
                           "cols": (lat, lon, detect_user_column(head)), "redact": redact}
        ss["path_error"] = None
        ss.pop("upload_df", None)
        return True
    except DPCoreError as e:
        ss["path_error"] = file_access.safe_message(str(e), [str(getattr(path, "label", path))]) if redact else str(e)
        return False
    except OSError as e:  # a folder or file the app may not read
        ss["path_error"] = (f"Could not read '{getattr(path, 'label', path)}': {e.strerror or 'error'}. Check the "
                            "path and that the app may read it.")
        return False


def large_upload_source(up: Any) -> engines.Source | None:
    """An upload above the engine threshold, copied to a private temporary folder (mode 0700) so
    DuckDB can stream it; None for smaller files and formats only the in-memory reader knows
    (GeoJSON).  Call :func:`keep_copy` once the copy is in use."""
    size = int(getattr(up, "size", 0) or 0)
    if size <= engines.threshold() or engine_rules._fmt(Path(up.name)) is None:  # noqa: SLF001
        return None
    folder = tempfile.mkdtemp(prefix="dpcore-upload-")
    target = Path(folder) / (re.sub(r"[^A-Za-z0-9._-]", "_", Path(up.name).name) or "upload.csv")
    try:
        with open(target, "wb") as fh:
            up.seek(0)
            shutil.copyfileobj(up, fh, 16 << 20)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"'{up.name}' is too large to read into memory, and it could not be saved for DuckDB "
                         f"({e.strerror or e}). Free space in the temporary folder ({tempfile.gettempdir()}) or "
                         "open the file where it is with 'Files on this computer'.") from None
    src = engines.Source.from_path(target)
    return engines.Source(src.paths, src.fmt, up.name)


def keep_copy(src: engines.Source | None, tmp_key: str) -> None:
    """Remember the temporary folder of the copy now in use under ``tmp_key``, deleting the copy
    it replaces (a failed upload leaves the earlier copy, still in use, alone)."""
    ss = st.session_state
    new = str(Path(src.paths[0]).parent) if src is not None else None
    old = ss.get(tmp_key)
    if old and old != new:
        shutil.rmtree(old, ignore_errors=True)
    ss[tmp_key] = new


def drop_copy(src: engines.Source | None) -> None:
    """Delete the temporary copy of an upload that was not taken."""
    if src is not None:
        shutil.rmtree(Path(src.paths[0]).parent, ignore_errors=True)


def route_large_upload(up: Any) -> bool | None:
    """Open a large points upload with DuckDB instead of reading it into memory: True when opened
    (the columns come next), False when refused (the message is kept as the upload's error), None
    for a small file, read as usual.  The copy is kept for the dataset once its points are counted
    (:func:`ui.kinds.points.data.path_columns_form`); until then it is the opened file's."""
    ss = st.session_state
    try:
        src = large_upload_source(up)
    except DPCoreError as e:
        ss["upload_error"] = str(e)
        return False
    if src is None:
        return None
    if open_path(src.paths[0], "duckdb", None, label=up.name):
        ss["upload_error"] = None
        forget_unused_copies(src)
        return True
    drop_copy(src)
    ss["upload_error"] = ss.pop("path_error", None)
    return False


def forget_unused_copies(keep: engines.Source | None = None) -> None:
    """Delete the temporary copies of large uploads that neither the loaded dataset nor the file
    opened for counting (``keep``) uses; a copy in use is never deleted."""
    ss = st.session_state
    copies: set[str] = ss.setdefault("upload_copies", set())
    if keep is not None:
        copies.add(str(Path(keep.paths[0]).parent))
    ds = ss.get("dataset")
    used = {str(Path(p).parent) for src in (getattr(ds, "source", None), keep) if src is not None
            for p in src.paths}
    opened = ss.get("path_open")
    if opened is not None:
        used |= {str(Path(p).parent) for p in opened["src"].paths}
    for folder in list(copies - used):
        shutil.rmtree(folder, ignore_errors=True)
        copies.discard(folder)


def column_choice(cols: list[str], detected: tuple[str | None, str | None, str | None]
                  ) -> tuple[str | None, str | None, str | None]:
    """Latitude, longitude and (optional) person columns, starting from the detected ones; call
    inside a form.  A coordinate column that was not recognised starts empty (None), not as the
    file's first column (a 'name' column offered as the latitude)."""
    lat0, lon0, user0 = detected
    c1, c2, c3 = st.columns(3)
    lat_col = c1.selectbox("Latitude column", cols, index=cols.index(lat0) if lat0 in cols else None,
                           placeholder="Choose the latitude column")
    lon_col = c2.selectbox("Longitude column", cols, index=cols.index(lon0) if lon0 in cols else None,
                           placeholder="Choose the longitude column")
    user_opts = ["(none: each row is one unit)"] + cols
    user_col = c3.selectbox("Person / user id column (optional)", user_opts,
                            index=user_opts.index(user0) if user0 in cols else 0)
    return lat_col, lon_col, None if user_col == user_opts[0] else user_col


def columns_missing(lat_col: str | None, lon_col: str | None) -> bool:
    """Say which coordinate column is still to be chosen (an error on the page); True if one is."""
    missing = [w for w, c in (("latitude", lat_col), ("longitude", lon_col)) if not c]
    if missing:
        st.error(f"Choose the {' and the '.join(missing)} column above: none was recognised by its name.")
    return bool(missing)


def read_code_upload(up: Any) -> tuple[pd.DataFrame, engines.Source | None]:
    """A table of area codes and counts from an upload, and the file DuckDB sums when it is large.

    Below the engine threshold the table is read whole (``None`` for the file); above it the
    table stays in a temporary copy that DuckDB sums, and its first 5,000 rows stand in for it on
    the page.  A table that cannot be read leaves no copy behind."""
    big = large_upload_source(up)
    try:
        df = read_code_table(up.getvalue(), up.name) if big is None else engines.get_engine("duckdb").head(big, 5000)
    except DPCoreError:
        drop_copy(big)
        raise
    release_unused()  # the reader's buffers, as the command line (8 M census blocks)
    return df, big
