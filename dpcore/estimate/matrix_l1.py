"""Pure ε-DP (L1) strategies for the matrix mechanism: the Haar design and L1 reweighting.

Implements Li & Miklau 2012, Sec. 3.5 (pure ε-DP variant, Laplace noise, L1
sensitivity) of the matrix mechanism (Li, Miklau, Hay, McGregor & Rastogi, "The matrix
mechanism: optimizing linear counting queries under differential privacy", VLDB Journal 24(6),
2015), next to the L2 Eigen-Design of Li & Miklau, "An adaptive mechanism for accurate query
answering under differential privacy", PVLDB 5(6), 2012.  The error of a strategy ``A``
under Laplace noise of scale ``Δ1(A)/ε`` is ``TSE_ε = (2/ε²) · Δ1(A)² · trace(G X⁺)`` with
``X = AᵀA`` (§1.6 with ``Δ1`` for ``Δ2``); all values here are per unit ``2/ε²``, the same
normalisation as :func:`dpcore.estimate.matrix_errors.tse_per_p` for a strategy with
``norm="l1"``.

* :func:`haar_strategy`: the Haar wavelet design of the paper's Fig. 2 (the total row plus
  unweighted ±1 Haar rows), extended to any ``n`` by unbalanced splits.
* :func:`l1_reweight`: row weights ``λ >= 0`` for a fixed design ``Q`` (``k × n``), the L1
  analogue of Program 1 (§2.1): minimise ``Δ1(diag(λ)Q)² · trace(G X⁺)`` with
  ``X = Qᵀ diag(λ²) Q``.

  - Square invertible ``Q`` (identity, Haar): our convex program
    ``min Σ c_i λ_i⁻²  s.t.  |Q|ᵀλ <= 1``, ``c_i = ||(W Q⁻¹)[:, i]||²``, solved through its
    Lagrangian dual with L-BFGS-B (as Program 1 in §2.4a); the relative duality gap is a
    certificate of optimality.
  - Over-complete ``Q`` (more rows than columns, e.g. the hierarchical tree or a geographic
    tree): the objective is scale invariant, so ``log λ`` is optimised with L-BFGS-B on the
    smooth surrogate ``2 log ||(|Q|ᵀλ)||_p + log trace(G X⁻¹)`` with increasing ``p``
    (``||·||_p → max`` = ``Δ1``), first with one weight per depth of the row-containment
    forest (tree levels), then per row.  The exact objective is evaluated at every point and
    the best one kept, starting from ``λ = 1``, so the result is never worse than the
    unweighted design.  This problem is not known to be convex in ``λ``; no certificate.

Afterwards rows whose weight fell below ``1e-3`` of the largest are dropped, and the kept rows
are snapped back to equal weights, each only if the error rises by at most ``1e-6`` (relative):
that avoids nearly singular strategies and, for a 0/1 design, keeps exact integer noise.  A
square design's rows that the workload does not use (``c_i = 0``) get the slack left in their
columns.  The weights are finally rescaled so that ``Δ1 = 1`` exactly (up to one rounding),
and the L1 completion ``d_j = 1 − ||a_j||₁`` (§7.3) is appended when it lowers the error by
more than ``1e-9`` (relative; it never raises it: the rows add information without changing
``Δ1``).  When the workload does not need every cell the result may lose full column rank; it
still spans the workload (§1.5) and :func:`dpcore.estimate.matrix_release.release` then reports
``x_hat_unbiased = False`` (§7.2 P9).

Privacy: every quantity here depends only on the public workload, never on the data (§3.1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpcore import lazy
from dpcore.errors import ParameterError
from dpcore.estimate.matrix_strategy import Strategy
from dpcore.estimate.matrix_workload import Workload

# SciPy on first use (dpcore.lazy): listing the mechanisms does not import it
sl = lazy.module("scipy.linalg")
sp = lazy.module("scipy.sparse")
minimize = lazy.function("scipy.optimize", "minimize")
nnls = lazy.function("scipy.optimize", "nnls")

__all__ = [
    "L1_REWEIGHT_MAX_N",
    "haar_matrix",
    "haar_strategy",
    "l1_reweight",
    "l1_objective",
]

#: Largest ``n`` for which :func:`dpcore.estimate.matrix_design.l1_strategy` reweights designs (each
#: evaluation of an over-complete design costs a few ``n³``; n = 1024 takes about 20 s).
L1_REWEIGHT_MAX_N = 1024
_EPS = np.finfo(float).eps
#: ``κ`` of the dual of ``min Σ c λ⁻² + tᵀλ``: the minimum is ``κ Σ c^{1/3} t^{2/3}``.
_KAPPA = 3.0 * 2.0 ** (-2.0 / 3.0)
#: Relative improvement below which the completion rows are not worth adding.
_COMPLETION_GAIN = 1e-9
#: Rows with weight below this fraction of the largest are candidates for pruning.
_PRUNE = 1e-3
#: Relative error increase accepted for a simpler matrix (pruned rows, unweighted rows).
_TIE = 1e-6


class _OutOfBudget(Exception):
    """Raised inside the objective when the evaluation budget is spent (caught by the caller)."""


# =============================================================================================
# The Haar design (paper Fig. 2)
# =============================================================================================


def haar_matrix(n: int) -> np.ndarray:
    """The Haar wavelet strategy of the paper's Fig. 2 as an ``n × n`` matrix.

    Row 0 is the total; then, level by level (block sizes ``n, n/2, …, 2``, blocks left to
    right), a row ``+1`` on the block's left half and ``−1`` on its right half.  For ``n`` a
    power of two this is exactly the paper's matrix (rows orthogonal, ``Δ1 = 1 + log2 n``).

    For other ``n`` every block ``[a, b)`` is split at ``round((a + b)/2)`` (numpy's
    round-half-even, the same cut as :func:`dpcore.estimate.matrix_strategy.hierarchical_strategy`, so the
    two designs share one tree); blocks of one cell are not split.  The rows are then no
    longer orthogonal, but there are still exactly ``n`` of them and the matrix is invertible
    (full column rank): the total and the ±1 row of each split block give the indicators of
    both halves, so by induction every leaf indicator ``e_j`` is in the row space.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ParameterError(f"n must be a whole number of at least 1 (got {n!r}).")
    n = int(n)
    rows = [np.ones(n)]
    blocks = [(0, n)]
    while blocks:
        nxt = []
        for a, b in blocks:
            if b - a < 2:
                continue
            c = int(np.linspace(a, b, 3).round()[1])
            r = np.zeros(n)
            r[a:c] = 1.0
            r[c:b] = -1.0
            rows.append(r)
            nxt.extend([(a, c), (c, b)])
        blocks = nxt
    return np.array(rows)


def haar_strategy(n: int) -> Strategy:
    """The (unweighted) Haar design as an L1 strategy, ``kind="haar"`` (see :func:`haar_matrix`)."""
    return Strategy("haar", int(n), A=haar_matrix(n), norm="l1")


# =============================================================================================
# Workload factor and the objective
# =============================================================================================


def _gram_factor(workload: Workload | np.ndarray) -> np.ndarray:
    """``F`` (``r × n``) with ``FᵀF = G``: the explicit ``W`` when it is short, else
    ``sqrt(σ) Vᵀ`` from the eigendecomposition of ``G`` (zero eigenvalues below
    ``10 n ε σ_max`` dropped, ours).  Memoised on the workload."""
    if isinstance(workload, Workload):
        memo = workload._memo
        if "l1_factor" in memo:
            return memo["l1_factor"]
        if workload.W is not None and workload.m <= workload.n:
            F = np.asarray(workload.W, dtype=float)
        else:
            F = _gram_factor(workload.gram())
        memo["l1_factor"] = F
        return F
    G = np.asarray(workload, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ParameterError(f"A Gram matrix must be square (got shape {G.shape}).")
    ev, V = sl.eigh((G + G.T) / 2, driver="evd")
    if ev[-1] <= 0:
        raise ParameterError("The workload is all zeros; it has no queries to answer.")
    keep = ev > 10.0 * G.shape[0] * _EPS * ev[-1]
    return np.sqrt(ev[keep])[:, None] * V[:, keep].T


class _Evaluator:
    """``T(u) = trace(G X⁻¹)`` and ``d_i = q_i X⁻¹ G X⁻¹ q_iᵀ = −∂T/∂u_i`` for
    ``X = Qᵀ diag(u) Q`` (Cholesky of ``X``; ``Q`` sparse, ``G = FᵀF``).  Cost: ``X`` from the
    sparse rows, one ``n³/3`` factorisation and two triangular solves with ``r`` right-hand
    sides."""

    def __init__(self, Q: np.ndarray, F: np.ndarray) -> None:
        self.Qd = np.ascontiguousarray(Q)
        self.Qs = sp.csr_matrix(Q)
        self.QsT = self.Qs.T.tocsr()
        self.FT = np.asfortranarray(F.T)
        self.evals = 0

    def __call__(self, u: np.ndarray, grad: bool = True) -> tuple[float, np.ndarray | None]:
        self.evals += 1
        X = np.asarray(self.QsT.multiply(u[None, :]).tocsr() @ self.Qd)
        L, info = sl.lapack.dpotrf((X + X.T) / 2, lower=1, clean=1)
        if info != 0:
            return math.inf, None
        Z, info = sl.lapack.dtrtrs(L, self.FT, lower=1)  # L⁻¹ Fᵀ
        if info != 0:
            return math.inf, None
        T = float(np.einsum("ij,ij->", Z, Z))
        if not grad:
            return T, None
        Y, _ = sl.lapack.dtrtrs(L, Z, lower=1, trans=1)  # X⁻¹ Fᵀ
        H = self.Qs @ np.ascontiguousarray(Y)
        return T, np.einsum("ij,ij->i", H, H)


def _objective(F: np.ndarray, A: np.ndarray) -> float:
    """``Δ1(A)² trace(G X⁺)``: Cholesky when ``X`` is definite, else the pseudo-inverse with
    the ``10 n ε λ_max`` threshold (ours); ``inf`` when ``A`` misses part of the
    workload's row space (``||F V0|| / ||F|| > 1e-8``, the support check of §3.4)."""
    T, _ = _Evaluator(A, F)(np.ones(A.shape[0]), grad=False)
    if not math.isfinite(T):
        X = A.T @ A
        lam, V = sl.eigh((X + X.T) / 2, driver="evd")
        keep = lam > 10.0 * A.shape[1] * _EPS * max(lam[-1], 0.0)
        if np.linalg.norm(F @ V[:, ~keep]) > 1e-8 * np.linalg.norm(F):
            return math.inf
        Z = F @ (V[:, keep] / np.sqrt(lam[keep]))
        T = float(np.einsum("ij,ij->", Z, Z))
    return float(np.abs(A).sum(axis=0).max()) ** 2 * T


def l1_objective(workload: Workload | np.ndarray, A: np.ndarray) -> float:
    """``Δ1(A)² · trace(G X⁻¹)`` for an explicit full-column-rank ``A`` (per unit ``2/ε²``);
    ``inf`` if ``A`` is not of full column rank.  The same value as
    :func:`dpcore.estimate.matrix_errors.tse_per_p` of ``Strategy(..., A=A, norm="l1")``."""
    return _objective(_gram_factor(workload), np.asarray(A, dtype=float))


# =============================================================================================
# Square designs: the convex program of §7.3 through its dual
# =============================================================================================


def _solve_square(c: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """``min Σ c_i λ_i⁻²  s.t.  Bᵀλ <= 1`` (``B = |Q|``, ``k × n``). Returns ``(λ, f, gap, nit)``.

    Lagrangian dual (ours): minimising ``c λ⁻² + t λ`` over ``λ > 0`` gives
    ``λ = (2c/t)^{1/3}`` and the value ``κ c^{1/3} t^{2/3}`` with ``κ = 3·2^{−2/3}``, so
    ``g(μ) = κ Σ_i c_i^{1/3} (Bμ)_i^{2/3} − Σ_j μ_j`` (concave) is maximised over ``μ >= 0``.
    L-BFGS runs on ``η = log μ`` (``t^{2/3}`` has an infinite slope at ``μ = 0``, which
    derails a bounded solver); the start is ``μ ∝ 1`` at its best scale
    ``a = (2 g₁ / (3 Σ μ))³``.  The primal point
    ``λ(μ)`` is capped row by row at ``1 / max_j B_ij`` (a row alone must be feasible) and
    rescaled to exact feasibility, so ``f(λ) − g(μ) >= 0`` certifies optimality.
    """
    k, n = B.shape
    Bs = sp.csr_matrix(B)
    BsT = Bs.T.tocsr()
    c3 = np.cbrt(c)
    cap = 1.0 / np.asarray(Bs.max(axis=1).todense()).ravel()

    def neg_dual(mu):
        t = np.maximum(Bs @ mu, 1e-300)
        ct = c3 / np.cbrt(t)
        val = _KAPPA * float((ct * t).sum()) - mu.sum()
        grad = BsT @ ((2.0 / 3.0) * _KAPPA * ct) - 1.0
        return -val, -grad

    def neg_dual_log(eta):  # μ = exp(η): no bound, and no infinite slope of t^{2/3} at μ = 0
        mu = np.exp(eta)
        val, grad = neg_dual(mu)
        return val, grad * mu

    def primal(mu):
        t = np.maximum(Bs @ mu, 1e-300)
        lam = np.minimum(np.cbrt(2.0 * c / t), cap)
        lam = lam / (BsT @ lam).max()
        return lam, float((c / lam**2).sum())

    mu0 = np.ones(n)
    g1 = _KAPPA * float((c3 * np.cbrt(Bs @ mu0) ** 2).sum())
    mu0 *= (2.0 * g1 / (3.0 * n)) ** 3
    res = minimize(
        neg_dual_log, np.log(mu0), jac=True, method="L-BFGS-B",
        options={"maxiter": 20000, "maxfun": 40000, "ftol": 1e-15, "gtol": 1e-12, "maxcor": 30},
    )
    mu = np.exp(res.x)
    dual = -neg_dual(mu)[0]
    lam, f = primal(mu)
    d0 = -neg_dual(mu0)[0]
    if d0 > dual:
        dual = d0
    lam0, f0 = primal(mu0)
    if f0 < f:
        lam, f = lam0, f0
    return lam, f, max(f - dual, 0.0) / f, int(res.nit)


# =============================================================================================
# Over-complete designs: p-norm surrogate in log λ
# =============================================================================================


def _depth_groups(Q: np.ndarray) -> np.ndarray:
    """Depth of each row in the containment forest of the row supports.

    ``depth_i`` = number of rows whose support strictly contains row ``i``'s (equal supports:
    the earlier row counts as containing).  For a tree of intervals or areas this is the
    level; it is only used to tie weights in the first optimisation stage.
    """
    S = sp.csr_matrix((np.asarray(Q) != 0).astype(float))
    size = np.asarray(S.sum(axis=1)).ravel()
    ov = (S @ S.T).tocoo()
    i, j, v = ov.row, ov.col, ov.data
    inside = (v == size[i]) & ((size[j] > size[i]) | ((size[j] == size[i]) & (j < i)))
    depth = np.bincount(i[inside], minlength=Q.shape[0])
    _, groups = np.unique(depth, return_inverse=True)
    return groups


def _solve_overcomplete(
    ev: _Evaluator, B: np.ndarray, groups: np.ndarray, max_evals: int,
    plan: Sequence[tuple[bool, float]], floor: float = 0.1,
) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Minimise ``Δ1(diag(λ)Q)² · trace(G X⁻¹)`` over ``λ > 0``; returns ``(λ, f, info)``.

    ``λ = exp(θ)``; for each ``p`` in ``ps`` L-BFGS-B minimises
    ``φ_p(θ) = 2 log ||Bᵀλ||_p + log T(λ²)`` (scale invariant like the objective, and
    ``||·||_p >= max`` with ratio at most ``n^{1/p}``) with the exact gradient
    ``∂φ/∂θ_i = 2 λ_i (B r^{p−1})_i / (Σ r^p · s_max) − 2 λ_i² d_i / T`` (``r = s / s_max``).
    ``plan`` lists the stages ``(tied, p)``: a tied stage shares one ``θ`` per group (few
    variables, converges in a few dozen evaluations), a free stage has one per row.  When a
    free stage follows a tied one, rows below ``floor`` times the largest weight are lifted to
    it: the tied stage can switch whole levels off, and the gradient of a row (∝ λ_i) then
    vanishes.  Every evaluation also computes the exact objective ``s_max² T``; the best
    point seen is returned (``λ = 1`` is the first), until ``max_evals`` evaluations.
    """
    Bs = sp.csr_matrix(B)
    BsT = Bs.T.tocsr()
    k = B.shape[0]
    best: dict[str, Any] = {"f": math.inf, "lam": np.ones(k)}

    def phi(theta_rows, p):
        if ev.evals >= max_evals:
            raise _OutOfBudget
        lam = np.exp(theta_rows - theta_rows.max())
        s = BsT @ lam
        smax = float(s.max())
        T, d = ev(lam * lam)
        if not math.isfinite(T):
            return math.inf, np.zeros_like(theta_rows)
        f = smax * smax * T
        if f < best["f"]:
            best["f"], best["lam"] = f, lam / smax
        r = s / smax
        rp = r**p
        Np = float(rp.sum())
        val = 2.0 * (math.log(smax) + math.log(Np) / p) + math.log(T)
        gs = (Bs @ (rp / np.maximum(r, 1e-300))) / (Np * smax)
        g = 2.0 * gs * lam - 2.0 * lam * lam * d / T
        return val, g

    E = sp.csr_matrix((np.ones(k), (np.arange(k), groups)), shape=(k, int(groups.max()) + 1))
    theta = np.zeros(k)
    stages = []
    try:
        prev_tied = True
        for tied, p in plan:
                if prev_tied and not tied:
                    # lift rows the tied stage switched off, else their gradient (∝ λ) vanishes
                    theta = np.maximum(theta, theta.max() + math.log(floor))
                prev_tied = tied
                if tied:
                    def fun(g_, p=p):
                        val, gr = phi(E @ g_, p)
                        return val, E.T @ gr
                    x0 = np.asarray(E.T @ theta) / np.asarray(E.sum(axis=0)).ravel()
                else:
                    def fun(t_, p=p):
                        return phi(t_, p)
                    x0 = theta
                res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                               options={"maxiter": 1000, "ftol": 1e-10, "gtol": 1e-7, "maxcor": 20})
                theta = np.log(best["lam"])
                stages.append({"tied": tied, "p": p, "nfev": int(res.nfev), "best": best["f"]})
    except _OutOfBudget:
        stages.append({"budget_exhausted": True, "best": best["f"]})
    lam = best["lam"]
    lam = lam / (BsT @ lam).max()
    T, _ = ev(lam * lam, grad=False)
    return lam, float((BsT @ lam).max()) ** 2 * T, {"stages": stages}


#: Free stages only (small n, large budget): reached the best values in our runs.
_PLAN_FREE = ((False, 8.0), (False, 32.0), (False, 128.0), (False, 512.0), (False, 2048.0))
#: Tied (per level) stages first, then free ones (large n, small budget).
_PLAN_TIED = ((True, 16.0), (True, 128.0), (True, 1024.0), (False, 16.0), (False, 128.0),
              (False, 1024.0))


def _default_max_evals(n: int) -> int:
    """Evaluation budget for an over-complete design: ``600 (128/n)^1.3`` clipped to
    [60, 600] (600 up to n = 128, 244 at n = 256, 60 at n = 1024).  One evaluation costs a
    few ``n³`` flops (measured 1–3 ms at n = 128, 10–30 ms at 256, 0.1–0.5 s at 1024 on two
    shared cores).  A count, not a clock, so the same workload always gets the same
    strategy (and the cache stays reproducible)."""
    return int(min(600, max(60, 600 * (128 / max(n, 1)) ** 1.3)))


# =============================================================================================
# Public entry point
# =============================================================================================


def _square_weights(Q: np.ndarray, F: np.ndarray, B: np.ndarray, info: dict[str, Any]) -> np.ndarray | None:
    """The optimal row weights of a square, well-conditioned design by the dual program (§7.3),
    or ``None`` when ``Q`` is too ill-conditioned to invert (the caller then searches)."""
    k = Q.shape[0]
    lam = None
    lu = sl.lu_factor(Q, check_finite=False)
    rc = sl.lapack.dgecon(lu[0], np.abs(Q).sum(axis=0).max(), norm="1")[0]
    if rc > 1e-12:
        FQi = sl.lu_solve(lu, F.T, trans=1).T  # F Q⁻¹: c_i = ||(W Q⁻¹)[:, i]||²
        c = np.einsum("ij,ij->j", FQi, FQi)
        # rows the workload does not use (c_i = 0 up to round-off, ~ε² relative) get no
        # weight in the program; they take the slack left in their columns afterwards
        need = c > 1e-24 * c.max()
        lam = np.zeros(k)
        lam[need], f, gap, nit = _solve_square(c[need], B[need])
        slack = 1.0 - B.T @ lam
        for i in np.flatnonzero(~need):
            cols = np.flatnonzero(B[i])
            li = max(float((slack[cols] / B[i, cols]).min()), 0.0)
            lam[i] = li
            slack -= li * B[i]
        # KKT: 2 c λ⁻³ = Bμ for some μ >= 0 on the tight columns (relative NNLS residual)
        tight = np.flatnonzero(B[need].T @ lam[need] >= 1 - 1e-6)
        rhs = 2.0 * c[need] / lam[need] ** 3
        _, resid = nnls(B[need][:, tight], rhs, maxiter=50 * max(tight.size, 1))
        info.update(method="dual", gap=gap, kkt=float(resid / np.linalg.norm(rhs)), nit=nit,
                    unused_rows=int((~need).sum()))
    return lam


def _prune_and_snap(F: np.ndarray, Q: np.ndarray, B: np.ndarray, lam: np.ndarray, f: float,
                    info: dict[str, Any]) -> tuple[np.ndarray, float]:
    """Drop rows the optimiser switched off, then snap to the unweighted kept rows, each only
    if the error rises by at most ``_TIE`` (relative)."""
    pruned = 0
    small = lam <= _PRUNE * lam.max()
    if small.any():
        lp = np.where(small, 0.0, lam)
        lp /= (B.T @ lp).max()
        fp = _objective(F, lp[:, None] * Q)
        if fp <= f * (1 + _TIE):
            lam, f, pruned = lp, fp, int(small.sum())
    kept = (lam > 0).astype(float)
    if np.ptp(lam[lam > 0]) > 0:
        ls = kept / (B.T @ kept).max()
        fs = _objective(F, ls[:, None] * Q)
        if fs <= f * (1 + _TIE):
            lam, f = ls, fs
            info["snapped_to_unweighted"] = True
    info["pruned_rows"] = pruned
    info.setdefault("snapped_to_unweighted", False)
    return lam, f


def _l1_completion(F: np.ndarray, A: np.ndarray, f: float, info: dict[str, Any]) -> tuple[np.ndarray, float, int]:
    """Append the L1 completion rows ``d_j e_j`` (§7.3) when they lower the error by more than
    ``_COMPLETION_GAIN``; returns the design, its error and the number of rows added."""
    n = A.shape[1]
    rows = 0
    dcol = 1.0 - np.abs(A).sum(axis=0)
    idx = np.flatnonzero(dcol > 1e-9)
    if idx.size:
        D = np.zeros((idx.size, n))
        D[np.arange(idx.size), idx] = dcol[idx]
        Ac = np.vstack([A, D])
        fc = _objective(F, Ac)
        if fc < f * (1 - _COMPLETION_GAIN):
            A, f, rows = Ac, fc, idx.size
            info["objective"] = f
    return A, f, rows


def l1_reweight(
    workload: Workload | np.ndarray, design: Strategy, *, completion: bool = True,
    max_evals: int | None = None,
) -> Strategy:
    """Row weights for ``design`` that minimise the pure-ε error ``Δ1² trace(G X⁺)`` (§7.3).

    Parameters
    ----------
    workload : Workload or ndarray
        The workload (only its Gram ``G = WᵀW`` matters, §1.6) or ``G`` itself.
    design : Strategy
        An explicit (non-Kronecker) design ``Q`` (``k × n``) of full column rank, e.g.
        :func:`dpcore.estimate.matrix_strategy.identity_strategy`,
        :func:`dpcore.estimate.matrix_strategy.hierarchical_strategy`, :func:`haar_strategy`, or a
        geographic tree's rows over its leaf areas.
    completion : bool
        Append the L1 completion rows ``d_j e_j``, ``d_j = 1 − ||a_j||₁`` (§7.3), when they
        lower the error.
    max_evals : int, optional
        Budget of objective evaluations for an over-complete design (default falls with
        ``n``: 600 up to ``n = 128``, 244 at 256, 60 at 1024).  With 600 evaluations the
        search uses free (per-row) stages only; with fewer it first ties the weights per
        level of the row-containment forest (:func:`_depth_groups`).

    Returns
    -------
    Strategy
        ``kind = "weighted-" + design.kind``, ``norm="l1"``, ``Δ1 = 1`` (to rounding), with
        ``info``: ``design``, ``weights`` (``λ``, scaled so ``Δ1 = 1``), ``objective`` (its
        ``Δ1² trace(G X⁺)``), ``unweighted`` (the design's own value), ``gain``
        (``unweighted / objective`` >= 1), ``method`` (``"dual"`` or ``"pnorm-lbfgs"``),
        ``gap`` (relative duality gap, square designs; ``nan`` otherwise), ``kkt``
        (relative KKT residual, square designs), ``unused_rows`` (square designs: rows with
        ``c_i = 0``), ``pruned_rows``, ``snapped_to_unweighted``, ``completion_rows``,
        ``evals``, ``seconds``, ``stages`` (over-complete: the L-BFGS stages and the best
        value after each).  If ``Q`` is not of full column rank the design is returned unweighted
        (``method="none"``) and ``info["note"]`` says why.
    """
    t0 = time.perf_counter()
    if design.factors or design.A is None:
        raise ParameterError("l1_reweight needs an explicit design; reweight Kronecker factors per axis.")
    Q = np.asarray(design.A, dtype=float)
    k, n = Q.shape
    F = _gram_factor(workload)
    if F.shape[1] != n:
        raise ParameterError(f"The design has {n} cells but the workload has {F.shape[1]}.")
    whash = workload.content_hash() if isinstance(workload, Workload) else ""
    B = np.abs(Q)
    colsum = B.sum(axis=0)
    if np.any(~np.isfinite(Q)) or np.any(colsum == 0) or np.any(B.sum(axis=1) == 0):
        raise ParameterError("The design has a zero row or column, or non-finite entries.")
    ev = _Evaluator(Q, F)
    T1, _ = ev(np.ones(k), grad=False)
    full_rank = math.isfinite(T1)  # X = QᵀQ is positive definite
    f_unw = float(colsum.max()) ** 2 * T1
    info: dict[str, Any] = {"design": design.kind, "unweighted": f_unw, "gap": math.nan,
                            "kkt": math.nan}
    lam = _square_weights(Q, F, B, info) if k == n else None
    if lam is None:
        if not full_rank:
            info.update(method="none", objective=f_unw, gain=1.0, weights=np.ones(k) / colsum.max(),
                        completion_rows=0, evals=ev.evals, seconds=time.perf_counter() - t0,
                        note="The design is not of full column rank, so it was not reweighted.")
            return Strategy(design.kind, n, A=Q / colsum.max(), norm="l1", workload_hash=whash,
                            info=info)
        budget = max_evals if max_evals is not None else _default_max_evals(n)
        plan = _PLAN_FREE if budget >= 600 else _PLAN_TIED
        lam, f, extra = _solve_overcomplete(ev, B, _depth_groups(Q), budget, plan)
        info.update(method="pnorm-lbfgs", **extra)
    lam = lam / (B.T @ lam).max()
    f = _objective(F, lam[:, None] * Q)  # the exact value of the matrix (same as tse_per_p)
    # Prune rows the optimiser switched off (λ_i <= 1e-3 max λ), then snap to the unweighted
    # kept rows, each only if the error rises by at most 1e-6 (relative): tiny weights make
    # X nearly singular (cell estimates with huge variance), and an unweighted
    # 0/1 matrix with Δ1 = 1 gets exact integer noise in release.  The result may lose full
    # column rank when the workload does not need every cell (it still spans W, §1.5; release
    # then reports x_hat_unbiased = False, P9); a workload that needs every cell keeps it.
    lam, f = _prune_and_snap(F, Q, B, lam, f, info)
    if not f <= f_unw:  # never worse than the unweighted design (also catches NaN)
        lam, f = np.ones(k) / colsum.max(), f_unw
    keep_rows = lam > 0
    A = lam[keep_rows, None] * Q[keep_rows]
    A /= np.abs(A).sum(axis=0).max()  # Δ1 = 1 (an exact no-op for a 0/1 design with Δ1 = 1)
    info.update(weights=lam, objective=f, program=f)
    # L1 completion (§7.3): d_j = max_k ||a_k||₁ − ||a_j||₁ on the slack columns
    A, f, rows = _l1_completion(F, A, f, info) if completion else (A, f, 0)
    info.update(gain=f_unw / f, completion_rows=rows, evals=ev.evals,
                seconds=time.perf_counter() - t0)
    return Strategy(f"weighted-{design.kind}", n, A=A, norm="l1", workload_hash=whash, info=info)
