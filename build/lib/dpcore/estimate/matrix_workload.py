"""Workloads of the matrix mechanism: public sets of linear counting queries as matrices.

A workload is a matrix ``W`` (``m × n``) whose rows are the queries over the ``n`` cells of the
data vector ``x``; every error of the matrix mechanism depends on it only through the Gram
``G = WᵀW`` (Li, Miklau, Hay, McGregor & Rastogi, "The matrix mechanism: optimizing linear
counting queries under differential privacy", VLDB Journal 24(6), 2015).  The families are those
of Li & Miklau, "An adaptive mechanism for accurate query answering under differential privacy",
PVLDB 5(6), 2012, Sec. 2.1 and 4.2:

* all 1-D ranges and prefixes (closed-form Grams), all 2-D rectangles as a Kronecker product of
  per-axis workloads, random 2-D rectangles, k-way (and weighted) marginals, explicit query rows;
* the closed-form Gram spectrum of a union of marginals (§2.9.4), used by the strategy design
  and the error formulas;
* a stable content hash, the only key under which a strategy is cached (§7.2 P14).

Privacy: a workload is public and data-free; nothing here reads the data.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore.data import queries
from dpcore.errors import InputError, ParameterError

__all__ = [
    "FULL_METHOD_MAX_N",
    "Workload",
    "all_range_workload",
    "prefix_workload",
    "range_2d_workload",
    "random_rectangles_workload",
    "marginals_workload",
    "explicit_workload",
    "all_range_gram",
    "prefix_gram",
]

#: Largest n for the dense (flat) Eigen-Design (ours: interactive up to 4096, hard cap 8192).
FULL_METHOD_MAX_N = 4096
#: Largest number of workload answers formed explicitly in a release or error report.
_MAX_EXPLICIT_ANSWERS = 2_000_000
#: Largest explicit workload matrix (entries) ever formed.
_MAX_MATRIX_ENTRIES = 50_000_000


def _pos_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParameterError(f"{what} must be a whole number of at least 1 (got {value!r}).")
    return int(value)


def all_range_gram(n: int) -> np.ndarray:
    """Gram of all ``n(n+1)/2`` ranges on a line: ``G_ij = min(i,j)·(n − max(i,j) + 1)`` (1-indexed)."""
    i = np.arange(1, n + 1, dtype=float)
    return np.minimum.outer(i, i) * (n - np.maximum.outer(i, i) + 1)


def prefix_gram(n: int) -> np.ndarray:
    """Gram of the ``n`` prefix (CDF) queries ``[1..k]``: ``G_ij = n − max(i,j) + 1``."""
    i = np.arange(1, n + 1, dtype=float)
    return n - np.maximum.outer(i, i) + 1


def _range_rows(n: int) -> np.ndarray:
    a, b = np.triu_indices(n)  # range [a, b] inclusive, a <= b
    j = np.arange(n)
    return ((j >= a[:, None]) & (j <= b[:, None])).astype(float)


@dataclass(frozen=True, eq=False)
class Workload:
    """A public set of linear counting queries over ``n = prod(shape)`` cells (row-major).

    Exactly one representation is primary: an explicit matrix ``W`` (``m × n``), a Gram
    ``G = WᵀW`` with ``m``, a product of factor workloads (``W = W₁ ⊗ W₂ ⊗ …``), or a union of
    marginals (closed form).  Build with the ``*_workload`` functions, not directly.

    Attributes
    ----------
    name : str
        Human-readable family name.
    shape : tuple of int
        Cell grid; ``n = prod(shape)``.
    m : int
        Number of queries.
    spec : dict
        Canonical JSON-able description used (with any explicit matrix) for :meth:`content_hash`.
    """

    name: str
    shape: tuple[int, ...]
    m: int
    spec: Mapping[str, Any]
    W: np.ndarray | None = None
    G: np.ndarray | None = None
    factors: tuple[Workload, ...] = ()
    marginals: tuple[tuple[tuple[int, ...], float], ...] = ()
    rects: np.ndarray | None = None  # (k, 4) half-open [r0, r1) × [c0, c1) for rectangle sets
    _memo: dict = field(default_factory=dict, repr=False)

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    def matrix(self) -> np.ndarray:
        """The explicit ``W`` (built on demand; refuses when it would be huge)."""
        if self.W is not None:
            return self.W
        if self.m * self.n > _MAX_MATRIX_ENTRIES:
            raise ParameterError(
                f"The workload {self.name!r} has {self.m:,} queries over {self.n:,} cells; forming "
                "its matrix would need too much memory. Use the Gram/Kronecker methods instead."
            )
        if "W" not in self._memo:
            if self.factors:
                W = self.factors[0].matrix()
                for f in self.factors[1:]:
                    W = np.kron(W, f.matrix())
            elif self.marginals:
                blocks = []
                for subset, w in self.marginals:
                    B = np.ones((1, 1))
                    for a, d in enumerate(self.shape):
                        B = np.kron(B, np.eye(d) if a in subset else np.ones((1, d)))
                    blocks.append(w * B)
                W = np.vstack(blocks)
            elif self.rects is not None:
                W = _rect_rows(self.rects, self.shape)
            elif self.spec.get("family") == "prefix":
                W = np.tril(np.ones((self.n, self.n)))
            elif self.spec.get("family") == "all_range":
                W = _range_rows(self.n)
            else:
                raise ParameterError(f"The workload {self.name!r} has no explicit matrix form.")
            self._memo["W"] = W
        return self._memo["W"]

    def gram(self) -> np.ndarray:
        """``G = WᵀW`` (``n × n``); refuses above :data:`FULL_METHOD_MAX_N` cells."""
        if self.G is not None:
            return self.G
        if self.n > FULL_METHOD_MAX_N:
            raise ParameterError(
                f"The workload {self.name!r} has n = {self.n:,} cells, above the dense limit "
                f"{FULL_METHOD_MAX_N:,}; use the Kronecker Eigen-Design (kron_eigen_design) for "
                "product workloads or the marginal closed form (marginal_strategy)."
            )
        if "G" not in self._memo:
            if self.factors:
                G = self.factors[0].gram()
                for f in self.factors[1:]:
                    G = np.kron(G, f.gram())
            elif self.marginals:
                G = np.zeros((self.n, self.n))
                for subset, w in self.marginals:
                    G += w * w * _kron_all(
                        [np.eye(d) if a in subset else np.ones((d, d)) for a, d in enumerate(self.shape)]
                    )
            else:
                W = self.matrix()
                G = W.T @ W
            self._memo["G"] = G
        return self._memo["G"]

    def content_hash(self) -> str:
        """Stable SHA-256 of the workload's canonical description (and explicit matrix bytes)."""
        if "hash" not in self._memo:
            h = hashlib.sha256()
            h.update(json.dumps(
                {"shape": list(self.shape), "m": self.m, "spec": self.spec}, sort_keys=True
            ).encode())
            for f in self.factors:
                h.update(f.content_hash().encode())
            for arr in (self.W, self.G, self.rects):
                if arr is not None:
                    a = np.ascontiguousarray(arr, dtype=np.float64)
                    h.update(repr(a.shape).encode())
                    h.update(a.tobytes())
            self._memo["hash"] = h.hexdigest()
        return self._memo["hash"]


def _kron_all(mats: Sequence[np.ndarray]) -> np.ndarray:
    out = np.ones((1, 1))
    for M in mats:
        out = np.kron(out, M)
    return out


def all_range_workload(n: int) -> Workload:
    """All ``n(n+1)/2`` range queries on a 1-D axis of ``n`` cells (closed-form Gram, §2.9.1)."""
    n = _pos_int(n, "The number of cells n")
    G = all_range_gram(n) if n <= FULL_METHOD_MAX_N else None
    return Workload(f"all ranges (n={n})", (n,), n * (n + 1) // 2, {"family": "all_range"}, G=G)


def prefix_workload(n: int) -> Workload:
    """The ``n`` prefix (cumulative, CDF) queries ``[1..k]`` on ``n`` cells (§2.9.1)."""
    n = _pos_int(n, "The number of cells n")
    G = prefix_gram(n) if n <= FULL_METHOD_MAX_N else None
    return Workload(f"prefix (n={n})", (n,), n, {"family": "prefix"}, G=G)


def range_2d_workload(n1: int, n2: int) -> Workload:
    """All 2-D rectangles on an ``n1 × n2`` grid: ``W = W_range(n1) ⊗ W_range(n2)`` (row-major)."""
    f1, f2 = all_range_workload(n1), all_range_workload(n2)
    return Workload(
        f"all rectangles ({n1}×{n2})", (f1.n, f2.n), f1.m * f2.m, {"family": "range_2d"},
        factors=(f1, f2),
    )


def _rect_rows(rects: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n1, n2 = shape
    r = np.arange(n1)
    c = np.arange(n2)
    rows = (r >= rects[:, 0:1]) & (r < rects[:, 1:2])  # (k, n1)
    cols = (c >= rects[:, 2:3]) & (c < rects[:, 3:4])  # (k, n2)
    return (rows[:, :, None] & cols[:, None, :]).reshape(len(rects), n1 * n2).astype(float)


def random_rectangles_workload(
    n1: int, n2: int, sizes: Sequence[tuple[int, int]], count_per_size: int, seed: int = 0
) -> Workload:
    """``count_per_size`` random rectangles of each ``(height, width)`` in ``sizes``.

    The workload is public and data-free, so a seeded numpy generator is fine here.  The drawn
    rectangles themselves (not the seed) enter the content hash.
    """
    n1, n2 = _pos_int(n1, "n1"), _pos_int(n2, "n2")
    k = _pos_int(count_per_size, "count_per_size")
    checked = []
    for h, w in sizes:
        h, w = _pos_int(h, "rectangle height"), _pos_int(w, "rectangle width")
        if h > n1 or w > n2:
            raise ParameterError(
                f"A {h}×{w} rectangle does not fit the {n1}×{n2} grid; use smaller sizes."
            )
        checked.append((h, w))
    if not checked:
        raise ParameterError("Give at least one rectangle size, e.g. (4, 4).")
    R = queries.random_cell_rectangles(n1, n2, checked, k, seed)
    return Workload(
        f"{len(R)} random rectangles ({n1}×{n2})", (n1, n2), len(R), {"family": "rectangles"},
        rects=R,
    )


def marginals_workload(
    domain: Sequence[int], k: int | None = None, *,
    subsets: Mapping[Sequence[int], float] | Iterable[Sequence[int]] | None = None,
) -> Workload:
    """All ``k``-way marginals of a table with attribute domain sizes ``domain`` (or given subsets).

    ``subsets`` may be a mapping ``{attribute tuple: weight}`` for weighted unions (spec P15:
    a group of weight ``w`` counts ``w²`` in TSE).  Cells are the row-major cross product.
    """
    dom = tuple(_pos_int(d, "An attribute domain size") for d in domain)
    if subsets is None:
        if k is None or not 0 <= k <= len(dom):
            raise ParameterError(
                f"k must be between 0 and the number of attributes ({len(dom)}); got {k!r}."
            )
        items = [(tuple(s), 1.0) for s in itertools.combinations(range(len(dom)), k)]
    else:
        pairs = subsets.items() if isinstance(subsets, Mapping) else ((s, 1.0) for s in subsets)
        items = []
        for s, w in pairs:
            s = tuple(sorted(int(a) for a in s))
            if any(a < 0 or a >= len(dom) for a in s) or len(set(s)) != len(s):
                raise ParameterError(f"Marginal {s} names an unknown attribute; use 0..{len(dom) - 1}.")
            if not (isinstance(w, int | float) and math.isfinite(w) and w > 0):
                raise ParameterError(f"The weight of marginal {s} must be a positive number.")
            items.append((s, float(w)))
    if not items:
        raise ParameterError("The marginal workload is empty; give k or at least one subset.")
    m = sum(math.prod(dom[a] for a in s) for s, _ in items)
    spec = {"family": "marginals", "items": [[list(s), w] for s, w in items]}
    return Workload(f"marginals {[s for s, _ in items]} on {dom}", dom, m, spec, marginals=tuple(items))


def explicit_workload(rows: np.ndarray, shape: Sequence[int] | None = None, name: str = "explicit") -> Workload:
    """A workload from explicit query rows (e.g. a 0/1 matrix of rectangles or area-code sets)."""
    try:
        W = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("Query rows must be a numeric matrix (one query per row).") from None
    if W.ndim != 2 or W.shape[0] == 0 or W.shape[1] == 0:
        raise InputError(f"Query rows must be a non-empty 2-D matrix (got shape {W.shape}).")
    if not np.all(np.isfinite(W)):
        raise InputError("Query rows contain NaN or infinity; fix the query definitions.")
    shp = (W.shape[1],) if shape is None else tuple(int(s) for s in shape)
    if math.prod(shp) != W.shape[1]:
        raise InputError(f"shape {shp} has {math.prod(shp)} cells but the rows have {W.shape[1]}.")
    W.setflags(write=False)
    return Workload(name, shp, W.shape[0], {"family": "explicit"}, W=W)


def _marginal_spectrum(workload: Workload) -> list[tuple[tuple[int, ...], int, float]]:
    """``(T, dim E_T, σ_T)`` for every subset T with σ_T > 0."""
    dom = workload.shape
    out = []
    for size in range(len(dom) + 1):
        for T in itertools.combinations(range(len(dom)), size):
            s = sum(
                w * w * math.prod(dom[a] for a in range(len(dom)) if a not in S)
                for S, w in workload.marginals if set(T) <= set(S)
            )
            if s > 0:
                out.append((T, math.prod(dom[a] - 1 for a in T), float(s)))
    return [t for t in out if t[1] > 0]
