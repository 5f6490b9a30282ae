"""Strategies of the matrix mechanism: the queries actually measured, and their least squares.

A strategy is a matrix ``A`` (``p × n``) whose answers ``Ax`` receive the noise; the workload is
then answered from the least-squares estimate ``x̂ = A⁺y`` (Li, Miklau, Hay, McGregor & Rastogi,
"The matrix mechanism: optimizing linear counting queries under differential privacy", VLDB
Journal 24(6), 2015).  This module holds what every design shares (Li & Miklau, PVLDB 2012):

* :class:`Strategy`: an explicit ``A`` or a Kronecker product ``A₁ ⊗ A₂ ⊗ …`` (Li & Miklau,
  "An adaptive mechanism for accurate query answering under differential privacy", PVLDB 5(6),
  2012, Sec. 4.2), its L1/L2 sensitivities, the factor of ``X⁺`` for ``X = AᵀA`` with
  the rank threshold of §7.2 P2/P3, and ``A x`` / ``A⁺ y`` one axis at a time;
* the two generic strategies: the identity (noisy cells) and the hierarchical tree of intervals
  (Hay, Rastogi, Miklau & Suciu, "Boosting the accuracy of differentially private histograms
  through consistency", PVLDB 3(1), 2010).

The optimised designs are in :mod:`dpcore.estimate.matrix_design` (L2) and
:mod:`dpcore.estimate.matrix_l1` (pure ε-DP, L1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpcore import lazy
from dpcore.errors import ParameterError
from dpcore.estimate.matrix_workload import _pos_int

# SciPy on first use (dpcore.lazy): listing the mechanisms does not import it
sl = lazy.module("scipy.linalg")

__all__ = [
    "Strategy",
    "identity_strategy",
    "hierarchical_strategy",
]

_EPS = np.finfo(float).eps


def _rank_tol(n: int) -> float:
    """Relative eigenvalue threshold ``10 n ε_mach`` (ours), not a coarse 1e-10."""
    return 10.0 * n * _EPS


#: Values :meth:`Strategy.derived` keeps per strategy (calibrations at a few budgets, variances).
DERIVED_KEPT = 16


def _read_only(value: Any) -> Any:
    """``value`` with its numpy arrays (also those in a tuple or list) made read only."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, tuple | list):
        for v in value:
            _read_only(v)
    return value


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
        factor ``L`` (``Z = L⁻ᵀ``, Li & Miklau 2012, Sec. 3.4).  Otherwise ``X`` is eigendecomposed and eigenvalues
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

    def derived(self, key: Any, make: Callable[[], Any]) -> Any:
        """A value computed from this public strategy and the public inputs named in ``key`` (a
        calibration, the workload's variances), made once per strategy, so that the releases of one
        plan redo no data-free work; never data.  At most :data:`DERIVED_KEPT` are kept (the oldest
        goes first).  Kept numpy arrays (also inside a tuple or list) are made read only, as they are
        shared by every caller.

        >>> s = Strategy("identity", 2, A=np.eye(2))
        >>> s.derived("two", lambda: 2), s.derived("two", lambda: 3)
        (2, 2)
        >>> s.derived("v", lambda: np.zeros(2)).flags.writeable
        False
        """
        memo = self._memo.setdefault("derived", {})
        try:
            return memo[key]
        except KeyError:
            pass
        value = _read_only(make())
        while len(memo) >= DERIVED_KEPT:
            memo.pop(next(iter(memo), None), None)
        memo[key] = value
        return value  # not memo[key]: another thread may have evicted it meanwhile

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
