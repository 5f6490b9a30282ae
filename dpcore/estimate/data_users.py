"""The data users' files of a release: ``measurements.csv``, ``design.json``, ``estimates.csv``.

One format for every kind (issue 25): one row per noisy measurement *before* post-processing
(``measurement_id, level, node, value, family, scale, variance, share, phase``), the design
(the finest cells, the cells every measured node sums, tree edges, invariants, the statement
that the noise draws are independent) and the generalised least-squares estimate of every
published cell or node with its exact variance (:mod:`dpcore.estimate.gls`).  Everything here
is public: noisy values, public parameters, the public cell list; never a true count (the
invariants are the release's declared public totals).

This module writes the files from arrays (the kinds' export modules call it) and reads them back
(:func:`load_design`, behind :func:`dpcore.estimate.gls.read_release`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import orjson
import pandas as pd
from numpy.typing import NDArray

from dpcore.data.csv_safe import csv_bytes, pandas_csv
from dpcore.errors import ParameterError
from dpcore.estimate.data_user_format import (
    DATA_USER_FILES,
    DESIGN_SCHEMA,
    MAX_REPLICATE_VALUES,
    MEASUREMENT_COLUMNS,
    MEASUREMENTS_PARQUET,
    REPLICATE_FILE,
    REPLICATE_SEED,
    REPLICATES,
    measurements_name,
    not_offered,
    parquet_bytes,
    replicates_info,
    section,
    variance_of,
)
from dpcore.estimate.design_nodes import NodeCells, NodeEdges, json_default
from dpcore.estimate.gls import Measurements, gls_estimate, measurements_from, replicates
from dpcore.estimate.tree_inference import tree_least_squares

__all__ = ["DATA_USER_FILES", "MAX_REPLICATE_VALUES", "MEASUREMENT_COLUMNS", "REPLICATES", "REPLICATE_FILE",
           "REPLICATE_SEED", "DataUserPack", "MeasuredLevel", "design_dict", "estimates_csv", "measurements_frame",
           "node_estimates", "not_offered", "pack_files", "replicate_files", "replicates_csv", "replicates_info", "section",
           "variance_of"]

INDEPENDENT = ("The noise draws of all measurements are independent of each other and of the data, with "
               "mean 0 and the variance given (exact for the discrete Laplace and discrete Gaussian).")


def replicates_csv(m: Measurements, R: int = REPLICATES, seed: int = REPLICATE_SEED) -> bytes:
    """``replicates.csv``: one row per finest cell (``code`` as in design.json's ``cells``), its GLS
    ``estimate`` and ``R`` data-free replicates ``rep_1..rep_R`` (:func:`dpcore.estimate.gls.replicates`;
    post-processing of the published measurements with a public seed: no data, no budget).  Values
    are rounded to 4 decimals.  The variance of a union: sum its rows column by column, then
    ``(1/R) Σ_r (rep_r − estimate)²``.

    >>> import scipy.sparse as sp
    >>> m = Measurements(sp.csr_matrix(np.eye(2)), np.array([5.0, 7.0]), np.full(2, 4.0), ["a", "b"])
    >>> print(replicates_csv(m, R=2).decode().splitlines()[0])
    code,estimate,rep_1,rep_2
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    est = gls_estimate(m)
    reps = np.round(replicates(m, R=R, seed=seed, estimate=est), 4)
    cols: dict[str, Any] = {"code": pa.array([str(c) for c in m.cells], pa.string()),
                            "estimate": pa.array(np.round(est, 4))}
    cols.update({f"rep_{r + 1}": pa.array(reps[:, r]) for r in range(reps.shape[1])})

    def write(t: pa.Table) -> bytes:  # pyarrow: the float columns written fast; a plain header line
        buf = io.BytesIO()
        pacsv.write_csv(t, buf, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
        return (",".join(map(str, t.column_names)) + "\n").encode() + buf.getvalue()

    # the Table itself (csv_bytes checks its text with pyarrow): no round trip through pandas of 82 columns
    return csv_bytes(pa.table(cols), write)


def replicate_files(m: Measurements) -> dict[str, bytes]:
    """``{"replicates.csv": ...}`` when :func:`replicates_info` writes it for ``m``'s cells, else ``{}``."""
    return {REPLICATE_FILE: replicates_csv(m)} if replicates_info(m.n)["file"] else {}


class MeasuredLevel(NamedTuple):
    """The public noise of one measured level: its name, the noise family, the exact scale the
    release drew with (as a float) and the level's share of the budget."""

    name: str
    family: str
    scale: float
    share: float


@dataclass(frozen=True)
class DataUserPack:
    """What a kind hands to the writers: the measurements (one entry per row, each with the index of
    its level in ``levels``) and the design.

    ``nodes`` and ``edges`` may be :class:`~dpcore.estimate.design_nodes.NodeCells` and
    :class:`~dpcore.estimate.design_nodes.NodeEdges` (arrays: a large design without a list per
    node); design.json is the same either way."""

    kind: str
    levels: Sequence[MeasuredLevel]
    row_level: NDArray[np.int64]
    node: Sequence[str]
    value: NDArray[Any]
    cells: Sequence[str]
    nodes: Mapping[str, Sequence[int]]
    edges: Sequence[tuple[str, str]] = ()
    invariants: Sequence[Mapping[str, Any]] = ()
    conditional_on_partition: bool = False
    cell_bounds: Sequence[Sequence[float]] | None = None

    def __post_init__(self) -> None:
        # the writers build this; a wrong row_level would label rows with another level's noise
        # silently (a negative index wraps), so it is checked here once (review finding)
        row = np.asarray(self.row_level)
        if (row.ndim != 1 or row.size != len(self.value) or len(self.node) != row.size
                or (row.size and (row.dtype.kind not in "iu" or row.min() < 0 or row.max() >= len(self.levels)))):
            raise ValueError(f"internal error: a data users' pack needs one level index in 0..{len(self.levels) - 1} "
                             f"per measurement ({row.size} indices, {len(self.value)} values, {len(self.node)} nodes)")

    def per_row(self, values: Sequence[Any], dtype: Any = object) -> NDArray[Any]:
        """``values`` (one per level) repeated for every measurement by its level."""
        return np.asarray(values, dtype=dtype)[np.asarray(self.row_level, dtype=np.int64)]

    def variances(self) -> NDArray[np.float64]:
        """The exact noise variance of every measurement: one :func:`variance_of` per level (the
        noise facts are kept per scale by :mod:`dpcore.privacy.noise`)."""
        return self.per_row([variance_of(lv.family, lv.scale) for lv in self.levels], float)


def measurements_frame(pack: DataUserPack) -> pd.DataFrame:
    """The rows of ``measurements.csv`` (count phase only; columns :data:`MEASUREMENT_COLUMNS`)."""
    value = np.asarray(pack.value)
    lv = pack.levels
    return pd.DataFrame({
        "measurement_id": np.arange(value.size), "level": pack.per_row([x.name for x in lv]).tolist(),
        "node": list(pack.node), "value": value, "family": pack.per_row([x.family for x in lv]).tolist(),
        "scale": pack.per_row([x.scale for x in lv], float), "variance": pack.variances(),
        "share": pack.per_row([x.share for x in lv], float), "phase": "count",
    })


def design_dict(pack: DataUserPack) -> dict[str, Any]:
    """The content of ``design.json`` (schema ``dpcore-design/1``)."""
    d: dict[str, Any] = {
        "schema": DESIGN_SCHEMA, "kind": pack.kind, "cells": [str(c) for c in pack.cells],
        # arrays handed over as such stay arrays (written by json_default, read by measurements_from)
        "nodes": (pack.nodes if isinstance(pack.nodes, NodeCells)
                  else {str(k): np.asarray(v, dtype=np.int64) for k, v in pack.nodes.items()}),
        "invariants": [dict(v) for v in pack.invariants],
        "independent": True, "statement": INDEPENDENT,
        "conditional_on_partition": bool(pack.conditional_on_partition),
    }
    if pack.edges:
        d["edges"] = (pack.edges if isinstance(pack.edges, NodeEdges)
                      else [[str(a), str(b)] for a, b in pack.edges])
    if pack.cell_bounds is not None:
        d["cell_bounds"] = [[float(x) for x in b] for b in pack.cell_bounds]
    return d


def pack_files(pack: DataUserPack, parquet_above: int | None = None) -> tuple[dict[str, bytes], Measurements]:
    """``measurements.csv`` (``measurements.parquet`` above ``parquet_above`` rows, default
    :data:`~dpcore.estimate.data_user_format.PARQUET_ROWS`) and ``design.json`` of ``pack`` (its
    ``measurements_file`` names the one written), and the :class:`Measurements` they describe (read
    by the same code as :func:`dpcore.estimate.gls.read_release`)."""
    frame, design = measurements_frame(pack), design_dict(pack)
    name = measurements_name(len(frame), parquet_above)
    design["measurements_file"] = name
    data = parquet_bytes(frame) if name == MEASUREMENTS_PARQUET else csv_bytes(frame, pandas_csv)
    files = {name: data, "design.json": orjson.dumps(design, option=orjson.OPT_SERIALIZE_NUMPY, default=json_default)}
    return files, measurements_from(design, frame)


def _as_list(values: Sequence[Any]) -> list[Any]:
    """``values`` as a list; an array through ``tolist`` (Python text, which pandas takes in half the
    time of numpy's ``str_`` scalars that ``list()`` would give)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def estimates_csv(level: Sequence[str], code: Sequence[str], estimate: NDArray[np.float64],
                  variance: NDArray[np.float64], published: NDArray[Any]) -> bytes:
    """``estimates.csv``: ``level, code, estimate, variance, sd, published``."""
    var = np.maximum(np.asarray(variance, float), 0.0)
    frame = pd.DataFrame({"level": _as_list(level), "code": _as_list(code), "estimate": np.round(estimate, 6),
                          "variance": np.round(var, 6), "sd": np.round(np.sqrt(var), 6),
                          "published": np.asarray(published)})
    return csv_bytes(frame, pandas_csv)


def node_estimates(m: Measurements) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """GLS estimate and exact variance of every node of a tree design (:class:`TreeLayout` order)."""
    tr = m.tree
    if tr is None:
        raise ParameterError("Node estimates by two passes need a tree design.")
    nodes = tr.parent.size
    var = np.full(nodes, math.inf)
    obs = np.zeros(nodes)
    meas = tr.row >= 0
    var[meas], obs[meas] = m.var[tr.row[meas]], np.asarray(m.y, float)[tr.row[meas]]
    pub = ~np.isnan(tr.public)
    var[pub], obs[pub] = 0.0, tr.public[pub]
    est, post = tree_least_squares(tr.parent, tr.depth, obs, var)
    return est, post
