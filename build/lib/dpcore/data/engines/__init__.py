"""Where raw rows become aggregates: numpy (in memory), DuckDB (out of core, the embedded default
for big files) and Spark (clusters).  See :mod:`dpcore.data.engines.base` for the rules that make the
three give identical answers.

>>> from dpcore.data.engines import get_engine, Source
>>> eng = get_engine("duckdb")                                 # doctest: +SKIP
>>> pc = eng.points(Source.from_path("pings/"), grid, lat="lat", lon="lon")  # doctest: +SKIP
"""

from __future__ import annotations

import os

from dpcore.data.engines.base import ENGINE_NAMES, CodeCounts, Engine, PointCounts, Source
from dpcore.errors import ParameterError

__all__ = ["AUTO_THRESHOLD_BYTES", "COUNT_COLUMN", "ENGINE_NAMES", "CodeCounts", "Engine", "PointCounts", "Source",
           "choose", "get_engine"]

#: Name of the count column when an engine's sums per code combination stand in for a raw table.
COUNT_COLUMN = "__dpcore_count__"

#: Inputs larger than this (bytes on disk) go to DuckDB when the engine is "auto": pandas needs
#: several times a CSV's size in memory, DuckDB streams it.  Override with DPCORE_AUTO_ENGINE_BYTES.
AUTO_THRESHOLD_BYTES = 200_000_000


def threshold() -> int:
    try:
        return int(os.environ.get("DPCORE_AUTO_ENGINE_BYTES", AUTO_THRESHOLD_BYTES))
    except ValueError:
        return AUTO_THRESHOLD_BYTES


def choose(requested: str | None, n_bytes: int) -> str:
    """The engine name for ``requested`` (``auto``/None: DuckDB above the size threshold, else numpy)."""
    name = (requested or "auto").lower()
    if name == "auto":
        return "duckdb" if n_bytes > threshold() else "numpy"
    if name not in ENGINE_NAMES:
        raise ParameterError(f"Unknown engine '{requested}'. Choose one of: auto, {', '.join(ENGINE_NAMES)}.")
    return name


def get_engine(name: str, *, spark_master: str | None = None) -> Engine:
    """An engine by name: ``numpy``, ``duckdb`` or ``spark`` (with its master URL)."""
    name = (name or "").lower()
    if name == "numpy":
        from dpcore.data.engines.numpy_engine import NumpyEngine

        return NumpyEngine()
    if name == "duckdb":
        from dpcore.data.engines.duckdb_engine import DuckDBEngine

        return DuckDBEngine()
    if name == "spark":
        from dpcore.data.engines.spark_engine import SparkEngine

        return SparkEngine(spark_master)
    raise ParameterError(f"Unknown engine '{name}'. Choose one of: {', '.join(ENGINE_NAMES)}.")
