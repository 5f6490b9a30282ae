"""Caches of matrix-mechanism strategies: in memory per process and on disk by workload hash.

Designing a strategy (the Eigen-Design of Li & Miklau, "An adaptive mechanism for accurate query
answering under differential privacy", PVLDB 5(6), 2012, for the matrix mechanism of Li, Miklau,
Hay, McGregor & Rastogi, VLDB Journal 24(6), 2015) takes seconds to a minute at a few thousand
cells, and depends only on the public workload.  So it is kept:

* :class:`DesignMemo`: a small thread-safe LRU of designs for page reruns and plan-then-release;
* :func:`cached_strategy`: a disk cache keyed by the workload's content hash and the method,
  never by data (ours: a cached strategy depends on public inputs only); a corrupt or mismatched entry is
  recomputed, and a loaded strategy is checked (finite, right shape, unit sensitivity).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpcore.errors import ParameterError
from dpcore.estimate.matrix_design import (
    design_strategy,
    eigen_design,
    kron_eigen_design,
    marginal_strategy,
)
from dpcore.estimate.matrix_strategy import Strategy
from dpcore.estimate.matrix_workload import Workload

__all__ = [
    "DesignMemo",
    "cache_dir",
    "cached_strategy",
]

_CACHE_FORMAT = 2  # 2: strategy info (incl. arrays) stored; L1-reweighted kinds


class DesignMemo:
    """A small thread-safe LRU of public, data-free designs (strategy, bounds, variances).

    Keys are public (a workload hash and a privacy definition), never data.  Page reruns and
    plan-then-release must not redo a design (seconds to a minute at a few thousand cells);
    Streamlit sessions are threads, so lookups and inserts are locked while ``make`` runs
    outside the lock.
    """

    def __init__(self, size: int = 4) -> None:
        self.size = int(size)
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, make: Any) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# =============================================================================================
# Disk cache: keyed by the workload hash and the method, never by data
# =============================================================================================


def cache_dir() -> Path:
    """``$DPCORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/dpcore/strategies`` (``~/.cache`` default)."""
    env = os.environ.get("DPCORE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dpcore" / "strategies"


def _cache_key(workload: Workload, method: str) -> str:
    return hashlib.sha256(f"{workload.content_hash()}|{method}|v{_CACHE_FORMAT}".encode()).hexdigest()[:32]


def _pack_info(obj: Any, name: str, arrays: dict[str, np.ndarray]) -> Any:
    """JSON-able copy of a strategy ``info``: arrays go to ``arrays`` (stored in the npz, float64
    bit-exact) and are replaced by ``{"__array__": key}``; numpy scalars become Python numbers."""
    if isinstance(obj, np.ndarray):
        key = f"info:{name}"
        arrays[key] = obj
        return {"__array__": key}
    if isinstance(obj, Mapping):
        return {str(k): _pack_info(v, f"{name}/{k}", arrays) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_pack_info(v, f"{name}/{i}", arrays) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return str(obj)


def _unpack_info(obj: Any, z: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            return np.array(z[obj["__array__"]])
        return {k: _unpack_info(v, z) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack_info(v, z) for v in obj]
    return obj


def _save(path: Path, strategy: Strategy, whash: str, method: str) -> None:
    parts = strategy.factors or (strategy,)
    arrays = {f"A{i}": p.A for i, p in enumerate(parts)}
    meta = {
        "format": _CACHE_FORMAT, "workload_hash": whash, "method": method, "kind": strategy.kind,
        "n": strategy.n, "norm": strategy.norm, "kinds": [p.kind for p in parts],
        "ns": [p.n for p in parts], "kron": bool(strategy.factors),
        "infos": [_pack_info(p.info, f"part{i}", arrays) for i, p in enumerate(parts)],
        "info": _pack_info(strategy.info, "top", arrays) if strategy.factors else None,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(tmp, meta=np.array(json.dumps(meta)), **arrays)
    os.replace(tmp, path)


def _load(path: Path, whash: str, method: str, n: int) -> Strategy:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if (meta.get("format"), meta.get("workload_hash"), meta.get("method"), meta.get("n")) != (
            _CACHE_FORMAT, whash, method, n
        ):
            raise ValueError("cache entry is for another workload")
        parts = []
        for i, (kind, ni) in enumerate(zip(meta["kinds"], meta["ns"], strict=True)):
            A = np.array(z[f"A{i}"], dtype=np.float64)
            if A.ndim != 2 or A.shape[1] != ni or not np.all(np.isfinite(A)):
                raise ValueError("bad strategy array")
            parts.append(Strategy(kind, ni, A=A, norm=meta["norm"],
                                  info=_unpack_info(meta["infos"][i], z)))
        top = _unpack_info(meta["info"], z) if meta["kron"] else None
    if meta["kron"]:
        s = Strategy(meta["kind"], n, factors=tuple(parts), norm=meta["norm"], workload_hash=whash,
                     info=top or {})
    else:
        s = Strategy(meta["kind"], n, A=parts[0].A, norm=meta["norm"], workload_hash=whash,
                     info=parts[0].info)
    if math.prod(p.n for p in parts) != n:
        raise ValueError("factor sizes do not match")
    if s.norm == "l2" and s.kind in ("eigen", "marginal", "kron") and abs(s.l2_sensitivity - 1) > 1e-9:
        raise ValueError("sensitivity is not 1")
    if s.norm == "l1" and any(p.kind.startswith("weighted-") and abs(p.l1_sensitivity - 1) > 1e-9
                              for p in parts):
        raise ValueError("L1 sensitivity of a reweighted strategy is not 1")
    return s


def cached_strategy(workload: Workload, method: str = "auto", *, pure_dp: bool = False,
                    gap_tol: float | None = None) -> Strategy:
    """The strategy for ``workload`` from the disk cache, computing and storing it on a miss.

    ``method``: ``"auto"`` (:func:`design_strategy`), ``"eigen"``, ``"kron"`` or ``"marginal"``.
    ``gap_tol`` (``"eigen"`` only) is Program 1's accepted relative duality gap (default 1e-6).
    The key is the workload's content hash plus the method (and ``gap_tol``); data never enters
    it.  A corrupt, mismatched or unreadable entry is ignored and recomputed (then overwritten).
    """
    makers = {
        "auto": lambda w: design_strategy(w, pure_dp=pure_dp),
        "eigen": (lambda w: eigen_design(w, gap_tol=gap_tol)) if gap_tol is not None else eigen_design,
        "kron": kron_eigen_design, "marginal": marginal_strategy,
    }
    if method not in makers:
        raise ParameterError(f"Unknown method {method!r}; use one of {sorted(makers)}.")
    if gap_tol is not None and method != "eigen":
        raise ParameterError("gap_tol applies to method='eigen' only.")
    mkey = f"{method}{'-pure' if pure_dp else ''}{f'-gap{gap_tol:g}' if gap_tol is not None else ''}"
    whash = workload.content_hash()
    path = cache_dir() / f"{_cache_key(workload, mkey)}.npz"
    if path.exists():
        try:
            return _load(path, whash, mkey, workload.n)
        except Exception:  # noqa: BLE001 - any unreadable entry means: recompute
            pass
    s = makers[method](workload)
    try:
        _save(path, s, whash, mkey)
    except OSError as exc:
        warnings.warn(f"Could not write the strategy cache at {path}: {exc}", RuntimeWarning, stacklevel=2)
    return s
