"""Error formulas of the matrix mechanism, per unit noise variance ``P`` (per unit ``2b²`` for Laplace).

The expected error of answering a workload ``W`` through a strategy ``A`` by least squares is
``TSE = P · Δ(A)² · trace(G X⁺)`` with ``G = WᵀW`` and ``X = AᵀA`` (Li, Miklau, Hay, McGregor &
Rastogi, "The matrix mechanism: optimizing linear counting queries under differential privacy",
VLDB Journal 24(6), 2015); no strategy beats the SVD lower bound ``svdb = (Σ sqrt σ_i)² / n``
(Li & Miklau, "An adaptive mechanism for accurate query answering under differential privacy",
PVLDB 5(6), 2012, Thm 2).  As in Li & Miklau 2012 (Sec. 2.3–2.4, 3.4):
``TSE/P``, RMSE, per-query variances and ``svdb``, with Kronecker identities for product
workloads and the closed-form spectrum for marginals, and the support check that refuses a
strategy which does not span the workload (§3.4, §7.2 P3).

Privacy: these are functions of the public workload and strategy only.
"""

from __future__ import annotations

import math

import numpy as np

from dpcore import lazy
from dpcore.errors import ParameterError
from dpcore.estimate.matrix_strategy import Strategy, _rank_tol
from dpcore.estimate.matrix_workload import _MAX_EXPLICIT_ANSWERS, Workload, _marginal_spectrum

# SciPy on first use (dpcore.lazy): listing the mechanisms does not import it
sl = lazy.module("scipy.linalg")

__all__ = [
    "svd_bound",
    "tse_per_p",
    "rmse_per_p",
    "query_variances_per_p",
    "error_report",
]


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
