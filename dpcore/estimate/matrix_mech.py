"""Adaptive matrix mechanism: the Eigen-Design of Li & Miklau (PVLDB 5(6), VLDB 2012).

Implements ``shared/specs/matrix-mechanism.md``:

* workloads (§1.2, §2.9.1): all 1-D ranges, prefixes, all 2-D rectangles (Kronecker Gram),
  random 2-D rectangles, k-way marginals, explicit 0/1 query rows; a stable content hash;
* the Eigen-Design (§2.3 steps 1–9): eigen-queries of ``G = WᵀW``, Program 1 solved through its
  Lagrangian dual with L-BFGS-B (§2.4a) plus a mandatory duality-gap certificate (SLSQP primal
  polish as the fallback, §2.4c), completion, the rank and pseudo-inverse checks of §7.2 P2/P3;
* the exactly optimal closed form for weighted unions of marginals (§2.9.4) and the per-axis
  Kronecker Eigen-Design for product workloads (§2.9.2), whose errors use Kronecker identities
  so a 256 × 256 grid never forms a 65,536 × 65,536 matrix;
* error formulas (§1.6, §2.7, §3.3): ``TSE/P = Δ2(A)² trace(G X⁺)``, RMSE, per-query
  variances, the SVD lower bound ``svdb = (Σ sqrt σ_i)² / n``;
* noise calibration (§3.2): analytic Gaussian (Balle & Wang 2018), the paper's classic
  ``P = 2 ln(2/δ)/ε²`` (only for ε < 1, §7.2 P11) and ρ-zCDP; pure ε-DP falls back to an
  L1-suited strategy (§7.3);
* the release ``y = Ax + z``, ``x̂ = A⁺y``, ``Wx̂`` with analytic standard errors (§1.5), noise
  drawn only from :mod:`dpcore.privacy.noise`;
* a disk cache of strategies keyed by the workload hash, never by data (§7.2 P14).

Privacy (§3.1): a strategy depends only on the public workload, never on the data, so choosing
it costs nothing.  :func:`release` does **not** charge a ledger: the caller charges
``result.cost`` (a :class:`~dpcore.privacy.budget.PrivacyCost`) to its :class:`~dpcore.privacy.budget.Ledger`
before publishing anything.  Neighbours are add/remove one tuple (one cell changes by ±1).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpcore import _lazy
from dpcore.data.domain import prefix_sums, rect_sums_from_prefix
from dpcore.errors import InputError, ParameterError
from dpcore.points import queries
from dpcore.privacy.budget import (
    PrivacyCost,
    gaussian_sigma_for_rho,
    laplace_scale_for_epsilon,
    pure,
    zcdp,
)
from dpcore.privacy.noise import NoiseSource, discrete_gaussian_variance, discrete_laplace_variance

# SciPy on first use (dpcore._lazy): listing the mechanisms does not import it
sl = _lazy.module("scipy.linalg")
special = _lazy.module("scipy.special")
minimize = _lazy.function("scipy.optimize", "minimize")

__all__ = [
    "FULL_METHOD_MAX_N",
    "Workload",
    "Strategy",
    "Release",
    "all_range_workload",
    "prefix_workload",
    "range_2d_workload",
    "random_rectangles_workload",
    "marginals_workload",
    "explicit_workload",
    "all_range_gram",
    "prefix_gram",
    "eigen_design",
    "marginal_strategy",
    "marginal_closed_form_tse",
    "kron_eigen_design",
    "identity_strategy",
    "hierarchical_strategy",
    "l1_strategy",
    "design_strategy",
    "svd_bound",
    "tse_per_p",
    "rmse_per_p",
    "query_variances_per_p",
    "error_report",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "Calibration",
    "calibrate",
    "release",
    "cache_dir",
    "cached_strategy",
]

#: Largest n for the dense (flat) Eigen-Design (spec §4.3: interactive up to 4096, hard cap 8192).
FULL_METHOD_MAX_N = 4096
#: Largest number of workload answers formed explicitly in a release or error report.
_MAX_EXPLICIT_ANSWERS = 2_000_000
#: Largest explicit workload matrix (entries) ever formed.
_MAX_MATRIX_ENTRIES = 50_000_000
_EPS = np.finfo(float).eps
_CACHE_FORMAT = 2  # 2: strategy info (incl. arrays) stored; L1-reweighted kinds


def _rank_tol(n: int) -> float:
    """Relative eigenvalue threshold ``10 n ε_mach`` (spec §7.2 P2/P3), not a coarse 1e-10."""
    return 10.0 * n * _EPS


def _pos_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParameterError(f"{what} must be a whole number of at least 1 (got {value!r}).")
    return int(value)


# =============================================================================================
# Workloads
# =============================================================================================


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


# =============================================================================================
# Strategies
# =============================================================================================


@dataclass(frozen=True, eq=False)
class Strategy:
    """A strategy matrix ``A`` (``p × n``), or a Kronecker product of factor strategies.

    Attributes
    ----------
    kind : str
        ``"eigen"``, ``"marginal"``, ``"kron"``, ``"identity"``, ``"hierarchical"``.
    A : ndarray or None
        The explicit strategy (``None`` for ``kind == "kron"``).
    factors : tuple of Strategy
        Per-axis strategies of a Kronecker strategy (row-major: ``A = A₁ ⊗ A₂ ⊗ …``).
    norm : {"l2", "l1"}
        The sensitivity the strategy was designed for ((ε, δ)/zCDP use L2, pure ε uses L1).
    workload_hash : str
        Hash of the workload it was designed for ("" if generic).
    info : dict
        Solver diagnostics: eigenvalues ``sigma``, weights ``u``, completion ``dsq``,
        ``program1`` optimum, relative duality ``gap``, ``rank``.
    """

    kind: str
    n: int
    A: np.ndarray | None = None
    factors: tuple[Strategy, ...] = ()
    norm: str = "l2"
    workload_hash: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    _memo: dict = field(default_factory=dict, repr=False)

    @property
    def is_kron(self) -> bool:
        return bool(self.factors)

    @property
    def p(self) -> int:
        return math.prod(f.p for f in self.factors) if self.factors else self.A.shape[0]

    @property
    def l2_sensitivity(self) -> float:
        """``Δ2(A) = max_j ||A[:, j]||₂`` (Kronecker: the product over the factors)."""
        if self.factors:
            return math.prod(f.l2_sensitivity for f in self.factors)
        return float(np.sqrt((self.A**2).sum(axis=0)).max())

    @property
    def l1_sensitivity(self) -> float:
        """``Δ1(A) = max_j ||A[:, j]||₁`` (Kronecker: the product over the factors)."""
        if self.factors:
            return math.prod(f.l1_sensitivity for f in self.factors)
        return float(np.abs(self.A).sum(axis=0).max())

    @property
    def max_column_support(self) -> int:
        """Most answers one cell changes: ``max_j nnz(A[:, j])`` (for grid-rounding slack)."""
        if self.factors:
            return math.prod(f.max_column_support for f in self.factors)
        return int((self.A != 0).sum(axis=0).max())

    def sensitivity(self) -> float:
        return self.l1_sensitivity if self.norm == "l1" else self.l2_sensitivity

    @property
    def full_rank(self) -> bool:
        """Full column rank: ``X = AᵀA`` has no dropped null space (memoised with X⁺'s factor),
        so the cell estimates ``A⁺y`` are unbiased (§7.2 P9)."""
        return all(f.gram_pinv()[2].shape[1] == 0 for f in (self.factors or (self,)))

    def gram_pinv(self) -> tuple[str, np.ndarray, np.ndarray]:
        """Factor ``X⁺ = Z Zᵀ`` of ``X = AᵀA``: ``("chol", L, V0)`` or ``("eig", Z, V0)``.

        A well-conditioned ``X`` (LAPACK ``pocon`` reciprocal condition > 1e-10) uses its Cholesky
        factor ``L`` (``Z = L⁻ᵀ``, spec §3.4).  Otherwise ``X`` is eigendecomposed and eigenvalues
        below ``10 n ε λmax`` are dropped (§7.2 P3); ``V0`` spans the dropped null space.  Never
        ``np.linalg.pinv`` with its default ``rcond = 1e-15``: it keeps round-off eigenvalues and
        reports errors below the lower bound (§7.2 P3).
        """
        if self.factors:
            raise ParameterError("gram_pinv is per factor for a Kronecker strategy.")
        if "pinv" not in self._memo:
            X = self.A.T @ self.A
            X = (X + X.T) / 2
            L, info = sl.lapack.dpotrf(X, lower=1, clean=1)
            if info == 0:
                rcond, info2 = sl.lapack.dpocon(L, np.abs(X).sum(axis=0).max(), uplo="L")
                if info2 == 0 and rcond > 1e-10:
                    self._memo["pinv"] = ("chol", L, np.zeros((self.n, 0)))
                    return self._memo["pinv"]
            lam, V = sl.eigh(X, driver="evd")
            keep = lam > _rank_tol(self.n) * max(lam[-1], 0.0)
            self._memo["pinv"] = ("eig", V[:, keep] / np.sqrt(lam[keep]), V[:, ~keep])
        return self._memo["pinv"]

    def whiten(self, rows: np.ndarray) -> np.ndarray:
        """``Zᵀ Fᵀ`` for query rows ``F`` (k × n): column i has squared norm ``f_i X⁺ f_iᵀ``."""
        kind, Z, _ = self.gram_pinv()
        if kind == "chol":
            return sl.solve_triangular(Z, rows.T, lower=True)
        return Z.T @ rows.T

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``A x`` (Kronecker: applied one axis at a time, never forming ``A``)."""
        if not self.factors:
            return self.A @ x
        T = x.reshape(tuple(f.n for f in self.factors))
        for ax, f in enumerate(self.factors):
            T = np.moveaxis(np.tensordot(f.A, T, axes=([1], [ax])), 0, ax)
        return T.reshape(-1)

    def solve(self, y: np.ndarray) -> np.ndarray:
        """Least squares ``x̂ = A⁺ y`` (Kronecker: ``A⁺ = ⊗ A_k⁺``, one axis at a time)."""
        if not self.factors:
            # A⁺y = X⁺Aᵀy with the memoised factor of X⁺ (no fresh SVD per release)
            kind, Z, _ = self.gram_pinv()
            b = self.A.T @ y
            if kind == "chol":
                return sl.cho_solve((Z, True), b)
            return Z @ (Z.T @ b)
        T = y.reshape(tuple(f.p for f in self.factors))
        for ax, f in enumerate(self.factors):
            Ap = f._memo.get("Apinv")
            if Ap is None:
                Ap = np.linalg.lstsq(f.A, np.eye(f.A.shape[0]), rcond=None)[0]
                f._memo["Apinv"] = Ap
            T = np.moveaxis(np.tensordot(Ap, T, axes=([1], [ax])), 0, ax)
        return T.reshape(-1)


def identity_strategy(n: int) -> Strategy:
    """The identity strategy (noisy cell counts): ``Δ1 = Δ2 = 1``."""
    return Strategy("identity", n, A=np.eye(n), norm="l1")


def hierarchical_strategy(n: int, branching: int = 2) -> Strategy:
    """All nodes of a ``branching``-ary tree of intervals over ``n`` cells (Hay et al. 2010).

    0/1 rows; ``Δ1`` is the number of levels.  Used as the pure-ε (L1) strategy (§7.3).
    """
    n = _pos_int(n, "n")
    rows = [np.ones(n)]
    blocks = [(0, n)]
    while any(b - a > 1 for a, b in blocks):
        nxt = []
        for a, b in blocks:
            if b - a <= 1:
                nxt.append((a, b))
                continue
            cuts = np.linspace(a, b, min(branching, b - a) + 1).round().astype(int)
            nxt.extend((int(c0), int(c1)) for c0, c1 in zip(cuts[:-1], cuts[1:], strict=True))
        for a, b in nxt:
            if (a, b) not in blocks:
                r = np.zeros(n)
                r[a:b] = 1
                rows.append(r)
        blocks = nxt
    return Strategy("hierarchical", n, A=np.array(rows), norm="l1")


# ---------------------------------------------------------------------------------------------
# Program 1 (§2.4a): dual L-BFGS-B with a duality-gap certificate
# ---------------------------------------------------------------------------------------------


def _solve_program1(c: np.ndarray, Q2: np.ndarray, gap_tol: float) -> tuple[np.ndarray, float, float]:
    """min Σ c_i/u_i s.t. Q2ᵀu <= 1 (Q2 = Q∘Q, rows of Q orthonormal). Returns (u, f, rel_gap).

    The dual ``g(μ) = 2 Σ sqrt(c_i (Q2 μ)_i) − Σ μ_j`` is maximised over ``μ >= 0`` from
    ``μ0 = svdb/n · 1`` (where ``g = svdb``); ``u(μ) = sqrt(c / Q2 μ)`` is rescaled to exact
    feasibility, so ``f(u) − g(μ) >= 0`` certifies optimality.
    """
    r, n = Q2.shape

    def neg_dual(mu):
        t = np.maximum(Q2 @ mu, 1e-300)
        val = 2.0 * np.sqrt(c * t).sum() - mu.sum()
        grad = Q2.T @ np.sqrt(c / t) - 1.0
        return -val, -grad

    def feasible(u):
        return u / (Q2.T @ u).max()

    def primal(mu):
        u = feasible(np.sqrt(c / np.maximum(Q2 @ mu, 1e-300)))
        return u, float((c / u).sum())

    # Every iterate is a dual point (a lower bound) and gives a feasible primal: keep the best
    # of each and stop as soon as the certificate is met.  Degenerate spectra (hierarchy Grams,
    # marginals) reach a 1e-4 gap in ~100 iterations but creep for thousands more.
    best = {"dual": -math.inf, "u": None, "f": math.inf, "it": 0}

    def track(mu):
        d = -float(neg_dual(mu)[0])
        u, f = primal(mu)
        if d > best["dual"]:
            best["dual"] = d
        if f < best["f"]:
            best["u"], best["f"] = u, f
        return (best["f"] - best["dual"]) / best["f"]

    def callback(intermediate_result):
        best["it"] += 1
        if best["it"] % 20 == 0 and track(intermediate_result.x) < gap_tol:
            raise StopIteration

    mu0 = np.full(n, np.sqrt(c).sum() ** 2 / n / n)
    res = minimize(
        neg_dual, mu0, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * n, callback=callback,
        options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-10, "maxcor": 30},
    )
    track(res.x)
    dual, u, f = best["dual"], best["u"], best["f"]
    if (f - dual) / f >= gap_tol and r <= 300:
        # Fallback (§2.4c): polish the primal with SLSQP from the dual's u; any dual point
        # stays a valid lower bound, so the certificate uses the same g(μ).
        pr = minimize(
            lambda v: ((c / v).sum(), -c / v**2), u, jac=True, method="SLSQP",
            bounds=[(1e-12, None)] * r,
            constraints=[{"type": "ineq", "fun": lambda v: 1.0 - Q2.T @ v, "jac": lambda v: -Q2.T}],
            options={"maxiter": 1000, "ftol": 1e-14},
        )
        if np.all(np.isfinite(pr.x)) and np.all(pr.x > 0):
            u2 = feasible(pr.x)
            f2 = float((c / u2).sum())
            if f2 < f:
                u, f = u2, f2
    return u, f, max(f - dual, 0.0) / f


def eigen_design(
    workload: Workload | np.ndarray, *, tau: float | None = None, gap_tol: float = 1e-6,
    on_gap: str = "raise", completion: bool = True,
) -> Strategy:
    """The Eigen-Design strategy of a workload (spec §2.3, Program 2), sensitivity ``Δ2(A) = 1``.

    Parameters
    ----------
    workload : Workload or ndarray
        A workload (its Gram is used) or a Gram matrix ``G`` (``n × n``, symmetric PSD).
    tau : float, optional
        Relative rank tolerance; default ``10 n ε_mach`` (§7.2 P2).
    gap_tol : float
        Accepted relative duality gap of Program 1 (§2.4a certificate).
    on_gap : {"raise", "warn"}
        What to do when the gap is not met even after the SLSQP fallback.
    completion : bool
        Add the diagonal completion rows (§2.3 step 7); they never raise Δ2 under add/remove-one.

    Returns
    -------
    Strategy
        ``kind="eigen"`` with ``info``: ``sigma``, ``u``, ``dsq``, ``program1`` (``TSE/P`` before
        completion), ``gap`` (relative), ``rank``.
    """
    if isinstance(workload, Workload):
        G = workload.gram()
        whash = workload.content_hash()
    else:
        G = np.asarray(workload, dtype=float)
        whash = ""
        if G.ndim != 2 or G.shape[0] != G.shape[1]:
            raise ParameterError(f"A Gram matrix must be square (got shape {G.shape}).")
    n = G.shape[0]
    if n > FULL_METHOD_MAX_N:
        raise ParameterError(
            f"The full Eigen-Design is limited to n <= {FULL_METHOD_MAX_N:,} cells (got {n:,}); use "
            "kron_eigen_design for grids/product workloads or marginal_strategy for marginals."
        )
    if on_gap not in ("raise", "warn"):
        raise ParameterError("on_gap must be 'raise' or 'warn'.")
    # step 1: symmetrise, eigendecompose (evd driver, §7.2 P1), sort descending, clip at 0
    ev, V = sl.eigh((G + G.T) / 2, driver="evd")
    ev, V = np.clip(ev[::-1], 0.0, None), V[:, ::-1]
    if ev[0] <= 0:
        raise ParameterError("The workload is all zeros; it has no queries to answer.")
    # step 2: rank truncation
    keep = ev > (tau if tau is not None else _rank_tol(n)) * ev[0]
    sigma, Q = ev[keep], V[:, keep].T
    Q2 = Q * Q
    # steps 3-4: Program 1 with c = sigma, rescaled to exact feasibility
    u, f, gap = _solve_program1(sigma, Q2, gap_tol)
    if gap >= gap_tol:
        msg = (
            f"Program 1 did not reach the duality-gap certificate: relative gap {gap:.2e} >= "
            f"{gap_tol:.0e}. The strategy is valid but may be suboptimal; retry with on_gap='warn' "
            "to accept it, or loosen gap_tol."
        )
        if on_gap == "raise":
            raise ParameterError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    # steps 5-8: A' = diag(sqrt u) Q, completion on the non-tight columns
    mcol2 = Q2.T @ u
    M = mcol2.max()
    dsq = M - mcol2
    dsq[dsq <= 1e-9 * M] = 0.0
    if not completion:
        dsq[:] = 0.0
    idx = np.flatnonzero(dsq)
    D = np.zeros((idx.size, n))
    D[np.arange(idx.size), idx] = np.sqrt(dsq[idx])
    A = np.vstack([np.sqrt(u)[:, None] * Q, D]) / math.sqrt(M)
    info = {"sigma": sigma, "u": u / M, "dsq": dsq / M, "program1": f, "gap": gap, "rank": int(keep.sum())}
    return Strategy("eigen", n, A=A, norm="l2", workload_hash=whash, info=info)


# ---------------------------------------------------------------------------------------------
# Marginals: closed form (§2.9.4)
# ---------------------------------------------------------------------------------------------


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


def marginal_closed_form_tse(workload: Workload) -> float:
    """Optimal ``TSE/P = (Σ_T dim(E_T) sqrt(σ_T))² / n`` for a union of marginals (= svdb)."""
    if not workload.marginals:
        raise ParameterError("The closed form applies only to marginal workloads (marginals_workload).")
    spec = _marginal_spectrum(workload)
    return sum(d * math.sqrt(s) for _, d, s in spec) ** 2 / workload.n


def marginal_strategy(workload: Workload) -> Strategy:
    """The exactly optimal strategy for a union of marginals (§2.9.4): ``A = stack_T sqrt(u_T) B_T``.

    ``B_T = ⊗_{a∈T} H_a ⊗_{a∉T} 1ᵀ/sqrt(d_a)`` with Helmert contrasts ``H_a``; every column has
    norm exactly 1, so no completion is needed.  Forms ``A`` (``rank × n``), so ``n`` is capped.
    """
    if not workload.marginals:
        raise ParameterError("marginal_strategy needs a marginal workload (marginals_workload).")
    if workload.n > FULL_METHOD_MAX_N:
        raise ParameterError(
            f"Forming the marginal strategy for n = {workload.n:,} cells exceeds the limit "
            f"{FULL_METHOD_MAX_N:,}; marginal_closed_form_tse still gives its error."
        )
    spec = _marginal_spectrum(workload)
    dom = workload.shape
    total = sum(d * math.sqrt(s) for _, d, s in spec)
    blocks, us = [], []
    for T, _, s in spec:
        u_T = math.sqrt(s) * workload.n / total
        B = _kron_all([sl.helmert(d) if a in T else np.full((1, d), 1 / math.sqrt(d)) for a, d in enumerate(dom)])
        blocks.append(math.sqrt(u_T) * B)
        us.append(u_T)
    A = np.vstack(blocks)
    info = {"program1": total**2 / workload.n, "gap": 0.0, "rank": A.shape[0], "u_T": us}
    return Strategy("marginal", workload.n, A=A, norm="l2", workload_hash=workload.content_hash(), info=info)


# ---------------------------------------------------------------------------------------------
# Kronecker Eigen-Design (§2.9.2)
# ---------------------------------------------------------------------------------------------


def kron_eigen_design(workload: Workload, **kwargs: Any) -> Strategy:
    """Per-axis Eigen-Design combined by Kronecker product: ``A = A₁ ⊗ A₂ ⊗ …`` (§2.9.2).

    For a product workload (e.g. :func:`range_2d_workload`) the factor workloads are used; for
    rectangles on a grid (:func:`random_rectangles_workload`) the all-range workload of each axis
    is used (it spans every rectangle).  ``Δ2`` and ``TSE/P`` are products over the factors, so
    a 256 × 256 grid costs two 256-cell designs.
    """
    if workload.factors:
        facs = workload.factors
    elif workload.rects is not None:
        facs = tuple(all_range_workload(d) for d in workload.shape)
    else:
        raise ParameterError(
            f"The workload {workload.name!r} is not a product of per-axis workloads; use "
            "eigen_design (n <= 4096) instead."
        )
    parts = tuple(eigen_design(f, **kwargs) for f in facs)
    return Strategy("kron", workload.n, factors=parts, norm="l2", workload_hash=workload.content_hash())


def design_strategy(workload: Workload, *, pure_dp: bool = False) -> Strategy:
    """The recommended strategy: closed form for marginals, Kronecker for products/rectangles,
    flat Eigen-Design otherwise; an L1 strategy (:func:`l1_strategy`) when ``pure_dp``."""
    if pure_dp:
        return l1_strategy(workload)
    if workload.marginals:
        return marginal_strategy(workload)
    if workload.factors or workload.rects is not None and workload.n > 1024:
        return kron_eigen_design(workload)
    return eigen_design(workload)


def _as_l1(s: Strategy) -> Strategy:
    """The same matrix read with L1 sensitivity (``norm="l1"``)."""
    if s.factors:
        return Strategy(s.kind, s.n, factors=tuple(_as_l1(f) for f in s.factors), norm="l1",
                        info=s.info)
    return Strategy(s.kind, s.n, A=s.A, norm="l1", info=s.info)


_L1_LABELS = {
    "identity": "identity", "hierarchical": "binary hierarchical tree", "haar": "Haar wavelet",
    "weighted-hierarchical": "L1-weighted binary hierarchical tree",
    "weighted-haar": "L1-weighted Haar wavelet",
}


def _l1_axis_candidates(factor: Workload, memo: dict) -> dict[str, Strategy]:
    """Identity, tree and Haar for one axis, the tree and Haar also L1-reweighted against the
    axis' factor workload (§7.3); memoised per factor workload (equal axes are solved once)."""
    from dpcore.estimate import matrix_l1  # local: matrix_l1 imports this module

    key = factor.content_hash()
    if key not in memo:
        d = factor.n
        out = {"identity": identity_strategy(d), "hierarchical": hierarchical_strategy(d),
               "haar": matrix_l1.haar_strategy(d)}
        if 1 < d <= matrix_l1.L1_REWEIGHT_MAX_N:
            for base in ("hierarchical", "haar"):
                out[f"weighted-{base}"] = matrix_l1.l1_reweight(factor, out[base])
        memo[key] = out
    return memo[key]


def l1_strategy(workload: Workload, extra_designs: Sequence[Strategy] = ()) -> Strategy:
    """Pure ε-DP strategy (§7.3): the candidate with the smallest L1 error ``Δ1² trace(G X⁺)``.

    Eigen-queries are dense and bad under L1 sensitivity (§7.3), so the candidates are the
    identity, the binary hierarchical tree and the Haar wavelet design
    (:func:`dpcore.estimate.matrix_l1.haar_strategy`), the tree and Haar each also L1-reweighted by
    :func:`dpcore.estimate.matrix_l1.l1_reweight` (the §7.3 program; the identity's optimal weights
    are all 1, so it is not reweighted), plus ``extra_designs`` (explicit strategies over the
    workload's ``n`` cells, e.g. a geographic tree's rows over leaf areas), each unweighted and
    reweighted.  Reweighting is skipped above ``matrix_l1.L1_REWEIGHT_MAX_N`` cells (per axis
    on grids).

    On grids (product workloads, rectangle sets) the candidates are Kronecker products of
    per-axis designs, each axis reweighted against its factor workload (all ranges of that
    axis for rectangle sets, as in :func:`kron_eigen_design`): the same design on every axis,
    and the per-axis best if that differs.  For a product workload the Kronecker error is the
    product of the per-axis errors, so per-axis reweighting is exact there.

    The choice is data-independent (public workload only).  ``info``: ``candidates``
    (label → ``TSE`` per unit ``2/ε²``), ``chosen``, ``best_unweighted`` (label),
    ``gain_over_unweighted`` (TSE ratio, >= 1), ``l1_note`` (one sentence for the curator),
    ``design_info`` (the chosen design's own ``info``, e.g. its weights and certificate).
    """
    from dpcore.estimate import matrix_l1  # local: matrix_l1 imports this module

    extras = []
    for i, d in enumerate(extra_designs):
        if not isinstance(d, Strategy) or d.n != workload.n:
            raise ParameterError(
                f"extra_designs[{i}] must be a Strategy over the workload's {workload.n} cells."
            )
        extras.append((f"extra[{i}] {d.kind}", _as_l1(d)))
    grid = bool(workload.factors) or workload.rects is not None
    cands: list[tuple[str, Strategy, bool]] = []  # (label, strategy, weighted?)
    skipped = False
    if grid and len(workload.shape) > 1:
        facs = workload.factors if workload.factors else tuple(
            all_range_workload(d) for d in workload.shape)
        memo: dict = {}
        per_axis = [_l1_axis_candidates(f, memo) for f in facs]
        skipped = any(d > matrix_l1.L1_REWEIGHT_MAX_N for d in workload.shape)
        kinds = [k for k in per_axis[0] if all(k in pa for pa in per_axis)]
        for k in kinds:
            cands.append((f"kron {k}", Strategy(
                "kron", workload.n, factors=tuple(pa[k] for pa in per_axis), norm="l1"),
                k.startswith("weighted")))
        best_axes = tuple(
            min(pa.values(), key=lambda s, f=f: tse_per_p(f, s)) for f, pa in zip(facs, per_axis, strict=True)
        )
        if len({s.kind for s in best_axes}) > 1:
            cands.append(("kron per-axis best " + "⊗".join(s.kind for s in best_axes), Strategy(
                "kron", workload.n, factors=best_axes, norm="l1"),
                any(s.kind.startswith("weighted") for s in best_axes)))
    else:
        n = workload.n
        base = {"identity": identity_strategy(n), "hierarchical": hierarchical_strategy(n),
                "haar": matrix_l1.haar_strategy(n)}
        cands += [(k, s, False) for k, s in base.items()]
        skipped = n > matrix_l1.L1_REWEIGHT_MAX_N
        if 1 < n <= matrix_l1.L1_REWEIGHT_MAX_N:
            for k in ("hierarchical", "haar"):
                cands.append((f"weighted-{k}", matrix_l1.l1_reweight(workload, base[k]), True))
    for label, d in extras:
        cands.append((label, d, False))
        if not d.factors and 1 < workload.n <= matrix_l1.L1_REWEIGHT_MAX_N:
            cands.append((f"weighted {label}", matrix_l1.l1_reweight(workload, d), True))
    errs = {}
    for label, s, _ in cands:
        try:
            errs[label] = tse_per_p(workload, s)
        except ParameterError:  # an extra design that does not span the workload
            errs[label] = math.inf
    label, best, _ = min(cands, key=lambda c: errs[c[0]])
    unweighted = [c for c in cands if not c[2]]
    ulabel = min(unweighted, key=lambda c: errs[c[0]])[0]
    gain = errs[ulabel] / errs[label]
    name = _L1_LABELS.get(best.kind, best.kind) if not best.factors else " ⊗ ".join(
        _L1_LABELS.get(f.kind, f.kind) for f in best.factors)
    note = f"Pure ε-DP strategy: {name} ({label}), expected total squared error {errs[label]:.5g}·2/ε²"
    if label == ulabel:
        note += "; no reweighted candidate beat it"
    else:
        note += (f", {gain:.3g}× lower than the best unweighted candidate ({ulabel}, "
                 f"{errs[ulabel]:.5g}·2/ε²)")
    if skipped:
        note += (f"; designs were not reweighted above {matrix_l1.L1_REWEIGHT_MAX_N} cells "
                 "(per axis on grids)")
    note += " (spec §7.3)."
    info = {
        "candidates": errs, "chosen": label, "best_unweighted": ulabel,
        "gain_over_unweighted": gain, "l1_note": note, "design_info": dict(best.info),
    }
    return Strategy(
        best.kind, best.n, A=best.A, factors=best.factors, norm="l1",
        workload_hash=workload.content_hash(), info=info,
    )


# =============================================================================================
# Errors (§1.6, §2.7, §3.3-3.4), all per unit noise variance P (per unit 2b² for Laplace)
# =============================================================================================


def _factor_workloads(workload: Workload, strategy: Strategy) -> tuple[Workload, ...] | None:
    if not strategy.factors:
        return None
    if workload.factors and len(workload.factors) == len(strategy.factors):
        return workload.factors
    return None


def _support_check(F: np.ndarray, V0: np.ndarray) -> None:
    """``||F V0|| / ||F|| < 1e-8`` with ``FᵀF ∝ G`` or ``F = G``: the strategy spans the workload."""
    if V0.shape[1] == 0:
        return
    rel = np.linalg.norm(F @ V0) / max(np.linalg.norm(F), 1e-300)
    if rel > 1e-8:
        raise ParameterError(
            f"The strategy does not span the workload (||G(I − X⁺X)|| / ||G|| = {rel:.1e}); answers "
            "would be biased. Use a strategy designed for this workload (eigen_design)."
        )


def _row_quadforms(F: np.ndarray, strategy: Strategy) -> np.ndarray:
    """``f_i X⁺ f_iᵀ`` for each row of ``F``, after the support check on ``F``."""
    _support_check(F, strategy.gram_pinv()[2])
    return (strategy.whiten(F) ** 2).sum(axis=0)


def _trace_term(workload: Workload, strategy: Strategy) -> float:
    """``trace(G X⁺)``: through ``W`` when it is explicit and short, else through ``G``."""
    if workload.W is not None and workload.m <= workload.n or (
        workload.marginals and workload.m <= workload.n
    ):
        return float(_row_quadforms(workload.matrix(), strategy).sum())
    G = workload.gram()
    kind, Z, V0 = strategy.gram_pinv()
    _support_check(G, V0)
    if kind == "chol":
        Y = sl.solve_triangular(Z, G, lower=True)  # L⁻¹ G
        return float(np.trace(sl.solve_triangular(Z, Y.T, lower=True)))  # tr(L⁻¹ G L⁻ᵀ)
    return float(np.sum((G @ Z) * Z))


def tse_per_p(workload: Workload, strategy: Strategy) -> float:
    """``TSE/P = Δ(A)² trace(G X⁺)`` (spec eq. 1); ``Δ`` is L2 or L1 per ``strategy.norm``.

    Kronecker strategies use ``Π_k Δ(A_k)² trace(G_k X_k⁺)`` on product workloads and per-query
    products on rectangle workloads; marginal strategies of marginal workloads use the closed
    form.  Raises ParameterError if the strategy does not span the workload (§3.4).
    """
    if strategy.n != workload.n:
        raise ParameterError(f"Strategy has {strategy.n} cells but the workload has {workload.n}.")
    sens2 = strategy.sensitivity() ** 2
    facs = _factor_workloads(workload, strategy)
    if facs is not None:
        return sens2 * math.prod(_trace_term(w, s) for w, s in zip(facs, strategy.factors, strict=True))
    if strategy.factors:
        return float(query_variances_per_p(workload, strategy).sum())
    return sens2 * _trace_term(workload, strategy)


def rmse_per_p(workload: Workload, strategy: Strategy) -> float:
    """Workload RMSE per ``sqrt(P)``: ``sqrt(TSE/(P m))`` (Def. 5)."""
    return math.sqrt(tse_per_p(workload, strategy) / workload.m)


def query_variances_per_p(workload: Workload, strategy: Strategy) -> np.ndarray:
    """Per-query ``v_i / P = Δ(A)² w_i X⁺ w_iᵀ`` for every workload row (§3.3)."""
    sens2 = strategy.sensitivity() ** 2
    if strategy.factors:
        if workload.rects is not None and len(strategy.factors) == 2:
            out = np.ones(workload.m)
            for ax, f in enumerate(strategy.factors):
                lo, hi = workload.rects[:, 2 * ax], workload.rects[:, 2 * ax + 1]
                Wf = (np.arange(f.n) >= lo[:, None]) & (np.arange(f.n) < hi[:, None])
                out *= _row_quadforms(Wf.astype(float), f)
            return sens2 * out
        facs = _factor_workloads(workload, strategy)
        if facs is None:
            raise ParameterError("This Kronecker strategy does not match the workload's factors.")
        if workload.m > _MAX_EXPLICIT_ANSWERS:
            raise ParameterError(
                f"The workload has {workload.m:,} queries; too many to list variances. Use "
                "tse_per_p for the total, or a smaller query set."
            )
        v = np.ones(1)
        for w, s in zip(facs, strategy.factors, strict=True):
            v = np.kron(v, _row_quadforms(w.matrix(), s))
        return sens2 * v
    return sens2 * _row_quadforms(workload.matrix(), strategy)


def _gram_eigenvalues(workload: Workload) -> np.ndarray:
    if workload.marginals:
        return np.concatenate([np.full(d, s) for _, d, s in _marginal_spectrum(workload)])
    if workload.factors:
        ev = np.ones(1)
        for f in workload.factors:
            ev = np.kron(ev, _gram_eigenvalues(f))
        return ev
    if workload.G is None and workload.W is not None and workload.n > workload.m:
        s = np.linalg.svd(workload.W, compute_uv=False)  # §7.2 P1: singular values of W
        return s**2
    return sl.eigh(workload.gram(), eigvals_only=True, driver="evd")


def svd_bound(workload: Workload) -> float:
    """SVD lower bound ``svdb = (Σ_i sqrt σ_i)² / n`` (Thm 2): every strategy has ``TSE/P >= svdb``.

    Eigenvalues below ``10 n ε σ_1`` are zeroed before the square root (§7.2 P4).  Product
    workloads use ``σ(G₁ ⊗ G₂) = σ(G₁) ⊗ σ(G₂)``; marginals use the closed-form spectrum.
    """
    ev = np.clip(_gram_eigenvalues(workload), 0.0, None)
    ev = ev[ev > _rank_tol(workload.n) * ev.max()]
    return float(np.sqrt(ev).sum() ** 2 / workload.n)


def error_report(workload: Workload, strategy: Strategy) -> dict[str, float]:
    """``TSE/P``, ``RMSE/sqrt(P)``, ``svdb``, the lower-bound RMSE and the RMSE ratio (>= 1)."""
    t = tse_per_p(workload, strategy)
    b = svd_bound(workload)
    if strategy.norm == "l2" and t < b * (1 - 1e-9):
        raise ParameterError(  # §7.2 P3/A.11: an error below svdb is a numerical bug, never real
            f"Computed TSE/P {t:.6g} is below the SVD bound {b:.6g}: numerical failure. Report it."
        )
    return {
        "tse_per_p": t, "rmse_per_sqrt_p": math.sqrt(t / workload.m), "svdb": b,
        "rmse_lower_bound_per_sqrt_p": math.sqrt(b / workload.m), "ratio_rmse": math.sqrt(t / b),
    }


# =============================================================================================
# Noise calibration (§3.2)
# =============================================================================================


def _ag_delta(sigma: float, eps: float, sens: float) -> float:
    """Exact δ of the Gaussian mechanism (Balle & Wang 2018, Thm 8):
    ``Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``; the second term in log space."""
    a, b = sens / (2.0 * sigma), eps * sigma / sens
    return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """Smallest σ for which Gaussian noise is (ε, δ)-DP: the analytic Gaussian (Balle & Wang 2018).

    Bisection on σ over the exact condition ``δ(σ) <= δ`` (δ(σ) decreases in σ), written with
    ``scipy.special.ndtr``/``log_ndtr``.  Hand-written because neither numpy/scipy nor the
    installed OpenDP exposes this calibration (OpenDP calibrates Gaussian noise through zCDP,
    which is looser).  Valid for every ε > 0.  The returned σ is the upper end of the final
    bracket, so ``δ(σ) <= δ`` holds for it.
    """
    eps = _check_pos(epsilon, "ε")
    d = _check_delta(delta)
    sens = _check_pos(l2_sensitivity, "The L2 sensitivity Δ2")
    lo, hi = sens * 1e-6, sens * max(1.0, math.sqrt(2 * math.log(1.25 / d)) / eps) * 2
    while _ag_delta(hi, eps, sens) > d:
        hi *= 2
    while _ag_delta(lo, eps, sens) <= d and lo > 1e-300:
        lo /= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-14 * hi:
            break
        if _ag_delta(mid, eps, sens) <= d:
            hi = mid
        else:
            lo = mid
    return hi


def classic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """The paper's calibration ``s = Δ2 sqrt(2 ln(2/δ)) / ε`` (Prop. 2), only for ε < 1 (§7.2 P11)."""
    eps = _check_pos(epsilon, "ε")
    d = _check_delta(delta)
    sens = _check_pos(l2_sensitivity, "The L2 sensitivity Δ2")
    if eps >= 1:
        raise ParameterError(
            f"The classic Gaussian calibration is only proven for ε < 1 (got ε = {eps:g}); use "
            "calibration='analytic'."
        )
    return sens * math.sqrt(2 * math.log(2 / d)) / eps


def _check_pos(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer) or not (
        math.isfinite(v) and v > 0
    ):
        raise ParameterError(f"{what} must be a finite number greater than 0 (got {v!r}).")
    return float(v)


def _check_delta(v: Any) -> float:
    d = _check_pos(v, "δ")
    if d >= 1:
        raise ParameterError(f"δ must lie strictly between 0 and 1 (got {v!r}); e.g. δ = 1e-6.")
    return d


# =============================================================================================
# Release (§1.5)
# =============================================================================================


@dataclass(frozen=True)
class Release:
    """Output of :func:`release`.  Charge ``cost`` to the dataset's Ledger before publishing.

    Attributes
    ----------
    answers : ndarray or None
        ``W x̂`` (``None`` when the workload has too many queries to list; use ``x_hat``).
    standard_errors : ndarray or None
        Analytic ``sqrt(v_i)`` of each answer (exact Gaussian/Laplace noise before post-processing).
    x_hat : ndarray
        Least-squares cell estimate ``A⁺ y``.  Only unbiased for cells when ``A`` has full column
        rank (§7.2 P9); do not present it as cell counts otherwise (``x_hat_unbiased``).
    noise_variance : float
        Exact per-answer variance of the noise added to each strategy query.
    cost : PrivacyCost
        What to charge: ``zcdp(ρ)`` for Gaussian noise (ρ = Δ²/(2σ²), rigorous for the discrete
        Gaussian, CKS20), ``pure(ε)`` for Laplace noise.
    guarantee : str
        The privacy statement in words (includes the (ε, δ) reading where applicable).
    strategy : Strategy
        The strategy actually used (an L1 strategy replaces an L2 one under pure ε-DP).
    notes : tuple of str
        Anything the curator must know (fallbacks, rounding slack).
    """

    answers: np.ndarray | None
    standard_errors: np.ndarray | None
    x_hat: np.ndarray
    x_hat_unbiased: bool
    noise_variance: float
    sensitivity: float
    noise_scale: float
    cost: PrivacyCost
    guarantee: str
    strategy: Strategy
    notes: tuple[str, ...] = ()


def _grid_exponent(sens: float, support: int, slack: float) -> int:
    """``k`` with ``sqrt(support)·2^k <= slack·Δ``: rounding to the grid adds at most that to Δ."""
    return math.floor(math.log2(slack * sens / math.sqrt(support)))


@dataclass(frozen=True)
class Calibration:
    """How the noise of a strategy's answers is calibrated (:func:`calibrate`).

    Attributes
    ----------
    pure : bool
        Pure ε-DP (discrete Laplace, L1) rather than Gaussian noise (L2).
    distribution : str
        ``"discrete_laplace"`` (exact integer noise on integer answers), ``"discrete_laplace_grid"``
        or ``"discrete_gaussian"`` (both on the grid ``2^grid_exponent``).
    scale : Fraction or float
        The Laplace scale ``b`` (exact :class:`~fractions.Fraction`) or the Gaussian ``σ``.
    grid_exponent : int or None
        ``k`` of the grid ``2^k`` the answers are rounded to; ``None`` for exact integer noise.
    variance : float
        Exact variance of the noise added to one strategy answer.
    sensitivity : float
        ``Δ1(A)`` or ``Δ2(A)`` of the strategy itself.
    effective_sensitivity : float
        The sensitivity the noise is calibrated to (``Δ`` plus the grid-rounding slack).
    cost : PrivacyCost
        What a release with this noise spends.
    guarantee : str
        The privacy statement in words.
    """

    pure: bool
    distribution: str
    scale: Fraction | float
    grid_exponent: int | None
    variance: float
    sensitivity: float
    effective_sensitivity: float
    cost: PrivacyCost
    guarantee: str


def calibrate(
    strategy: Strategy, *, epsilon: float | None = None, delta: float | None = None,
    rho: float | None = None, calibration: str = "analytic", grid_slack: float = 1e-6,
    integral_data: bool = True,
) -> Calibration:
    """The noise :func:`release` adds to ``strategy``'s answers, from public inputs only (§3.2).

    The one place the noise is calibrated: :func:`release` draws with it and previews (the
    mechanism's plan) read it, so the previewed variance is the drawn one.  Privacy as in
    :func:`release`: ``rho`` → ρ-zCDP; ``epsilon`` and ``delta`` → σ from the ``calibration``
    (analytic Balle–Wang or the paper's classic formula), charged as the zCDP it implies;
    ``epsilon`` alone → pure ε-DP with discrete Laplace noise and L1 sensitivity.  Integer
    strategies on integer data (``integral_data``) get exact integer Laplace noise; otherwise
    answers are rounded to the grid ``2^k`` and the sensitivity grows by the rounding slack
    (``Δ + s·2^k`` in L1, ``Δ + sqrt(s)·2^k`` in L2, ``s = max_j nnz(A[:, j])``), at most
    ``grid_slack·Δ``.
    """
    if rho is not None and (epsilon is not None or delta is not None):
        raise ParameterError("Give either rho (zCDP) or epsilon/delta, not both.")
    pure_mode = epsilon is not None and delta is None and rho is None
    if not pure_mode and rho is None and (epsilon is None or delta is None):
        raise ParameterError("Give rho, or epsilon and delta, or epsilon alone for pure ε-DP.")
    support = strategy.max_column_support
    if pure_mode:
        eps = _check_pos(epsilon, "ε")
        sens = strategy.l1_sensitivity
        integral = integral_data and all(
            np.all(f.A == np.round(f.A)) for f in (strategy.factors or (strategy,)))
        if integral:
            k, eff, dist = None, sens, "discrete_laplace"
            scale: Fraction | float = laplace_scale_for_epsilon(eps, sens)
            var = discrete_laplace_variance(scale)
        else:
            k = _grid_exponent(sens, support, grid_slack)
            eff = sens + support * 2.0**k  # L1: each changed value may move one more step
            dist = "discrete_laplace_grid"
            scale = laplace_scale_for_epsilon(eps, eff)
            var = discrete_laplace_variance(scale / Fraction(2) ** k) * 4.0**k
        return Calibration(
            True, dist, scale, k, float(var), float(sens), float(eff), pure(eps),
            f"pure ε-DP with ε = {eps:g} (discrete Laplace, L1 sensitivity {sens:.6g})",
        )
    sens = strategy.l2_sensitivity
    k = _grid_exponent(sens, support, grid_slack)
    eff = sens + math.sqrt(support) * 2.0**k
    if rho is not None:
        sigma = gaussian_sigma_for_rho(rho, eff)
        guarantee = f"ρ-zCDP with ρ = {rho:g}"
    else:
        if calibration == "analytic":
            sigma = analytic_gaussian_sigma(epsilon, delta, eff)
        elif calibration == "classic":
            sigma = classic_gaussian_sigma(epsilon, delta, eff)
        else:
            raise ParameterError("calibration must be 'analytic' or 'classic'.")
        # The (ε, δ) calibration is proven for continuous Gaussian noise; the noise drawn is the
        # discrete Gaussian on a grid, whose proven guarantee is the zCDP reading charged here.
        guarantee = (
            f"ρ-zCDP with ρ = Δ²/(2σ²), σ set by the {calibration} Gaussian calibration for "
            f"(ε = {epsilon:g}, δ = {delta:g}); read (ε, δ) through the zCDP conversion"
        )
    var = discrete_gaussian_variance(Fraction(sigma) / Fraction(2) ** k) * 4.0**k
    rho_used = eff * eff / (2.0 * sigma * sigma)
    return Calibration(
        False, "discrete_gaussian", float(sigma), k, float(var), float(sens), float(eff),
        zcdp(float(np.nextafter(rho_used, np.inf))), guarantee,
    )


def release(
    workload: Workload, strategy: Strategy, x: np.ndarray, source: NoiseSource, *,
    epsilon: float | None = None, delta: float | None = None, rho: float | None = None,
    calibration: str = "analytic", grid_slack: float = 1e-6,
) -> Release:
    """Answer the workload with the matrix mechanism: ``y = Ax + z``, ``x̂ = A⁺y``, ``W x̂`` (§1.5).

    Privacy (choose one): ``rho`` → ρ-zCDP Gaussian; ``epsilon`` and ``delta`` → (ε, δ)-DP
    Gaussian calibrated by ``calibration`` (``"analytic"`` Balle–Wang, ``"classic"`` the paper's
    formula for ε < 1); ``epsilon`` alone → pure ε-DP with discrete Laplace noise on an L1
    strategy (an L2 strategy is replaced by :func:`l1_strategy`, and ``notes`` says so, §7.3).

    Noise comes from ``source`` (:mod:`dpcore.privacy.noise`) with the calibration of :func:`calibrate`:
    Gaussian noise is the discrete Gaussian on the grid ``2^k``
    (:meth:`NoiseSource.gaussian_on_grid`), whose rounding can move each of the
    ``s = max_j nnz(A[:, j])`` changed answers by one grid step; the noise is calibrated to
    ``Δ + sqrt(s)·2^k <= Δ (1 + grid_slack)``.  Integer strategies on integer counts get exact
    integer Laplace noise with no slack.

    The caller charges ``result.cost`` to its Ledger; this function never touches a ledger.
    ``x`` is the private count vector (row-major over ``workload.shape``); nothing here reads
    it except the single product ``Ax`` (and whether its entries are whole numbers).
    """
    xv = np.asarray(x, dtype=np.float64).reshape(-1)
    if xv.size != workload.n:
        raise InputError(f"The data vector has {xv.size} cells but the workload has {workload.n}.")
    if not np.all(np.isfinite(xv)):
        raise InputError("The data vector contains NaN or infinity; counts must be finite numbers.")
    if strategy.n != workload.n:
        raise ParameterError(f"Strategy has {strategy.n} cells but the workload has {workload.n}.")
    notes: list[str] = []
    pure_mode = epsilon is not None and delta is None and rho is None
    if rho is not None and (epsilon is not None or delta is not None):
        raise ParameterError("Give either rho (zCDP) or epsilon/delta, not both.")
    if not pure_mode and rho is None and (epsilon is None or delta is None):
        raise ParameterError("Give rho, or epsilon and delta, or epsilon alone for pure ε-DP.")
    if pure_mode and strategy.norm != "l1":
        strategy = l1_strategy(workload)
        notes.append(
            "Pure ε-DP: the L2-optimised strategy was replaced by an L1 strategy "
            f"({strategy.kind}{'-' + strategy.factors[0].kind if strategy.factors else ''}); "
            "Eigen-Design strategies have large L1 sensitivity (spec §7.3)."
        )
    if not pure_mode and strategy.norm != "l2":
        notes.append("Gaussian noise on an L1-designed strategy: valid but not error-optimal.")
    cal = calibrate(strategy, epsilon=epsilon, delta=delta, rho=rho, calibration=calibration,
                    grid_slack=grid_slack, integral_data=bool(np.all(xv == np.round(xv))))
    Ax = strategy.apply(xv)
    if cal.distribution == "discrete_laplace":
        y = np.rint(Ax) + source.discrete_laplace(cal.scale, Ax.size)
    elif cal.distribution == "discrete_laplace_grid":
        y = source.laplace_on_grid(Ax, cal.scale, cal.grid_exponent)
        notes.append(f"Real-valued strategy answers were rounded to the grid 2^{cal.grid_exponent}.")
    else:
        y = source.gaussian_on_grid(Ax, cal.scale, cal.grid_exponent)
    var = cal.variance
    x_hat = strategy.solve(y)
    # Answers and analytic standard errors: v_i = Var(z) · w_i X⁺ w_iᵀ
    answers = ses = None
    listable = workload.m <= _MAX_EXPLICIT_ANSWERS and (
        bool(workload.factors) or workload.rects is not None or workload.W is not None
        or workload.m * workload.n <= _MAX_MATRIX_ENTRIES)
    if listable:
        v = query_variances_per_p(workload, strategy) / strategy.sensitivity() ** 2 * var
        ses = np.sqrt(v)
        if workload.factors and len(workload.factors) == 2:
            X = x_hat.reshape(workload.shape)
            answers = (workload.factors[0].matrix() @ X @ workload.factors[1].matrix().T).reshape(-1)
        elif workload.rects is not None and len(workload.shape) == 2:
            # rectangle sums from 2-D prefix sums: never the dense m × n matrix, which
            # Workload.matrix() refuses above 50 M entries (1,000 rectangles on 256 × 256)
            answers = rect_sums_from_prefix(prefix_sums(x_hat.reshape(workload.shape)), workload.rects)
        else:
            answers = workload.matrix() @ x_hat
    else:
        notes.append(f"{workload.m:,} queries are too many to list; answer them from x_hat.")
    full_rank = strategy.full_rank
    return Release(
        answers=answers, standard_errors=ses, x_hat=x_hat, x_hat_unbiased=full_rank,
        noise_variance=float(var), sensitivity=float(cal.effective_sensitivity if not cal.pure else cal.sensitivity),
        noise_scale=float(cal.scale), cost=cal.cost, guarantee=cal.guarantee, strategy=strategy,
        notes=tuple(notes),
    )


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
# Disk cache (§7.2 P14): keyed by the workload hash and the method, never by data
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
