"""Strategy selection for the matrix mechanism: the Eigen-Design and the pure ε-DP choice.

Implements the adaptive strategy of Li & Miklau, "An adaptive mechanism for accurate query
answering under differential privacy", PVLDB 5(6), 2012, for the matrix mechanism of Li, Miklau,
Hay, McGregor & Rastogi, "The matrix mechanism: optimizing linear counting queries under
differential privacy", VLDB Journal 24(6), 2015, and Li & Miklau, PVLDB 2012, Sec. 3:

* the Eigen-Design (§2.3 steps 1–9): eigen-queries of ``G = WᵀW``, Program 1 solved through its
  Lagrangian dual with L-BFGS-B (§2.4a) plus a mandatory duality-gap certificate (SLSQP primal
  polish as the fallback, §2.4c), completion, the rank check of §7.2 P2;
* the exactly optimal closed form for weighted unions of marginals (§2.9.4) and the per-axis
  Kronecker Eigen-Design for product workloads (§2.9.2), so a 256 × 256 grid never forms a
  65,536 × 65,536 matrix;
* :func:`design_strategy`, the recommended strategy for a workload, and :func:`l1_strategy`, the
  pure ε-DP (L1) choice among the identity, tree and Haar designs and their L1 reweightings of
  :mod:`dpcore.estimate.matrix_l1` (§7.3).

Privacy (§3.1): a strategy depends only on the public workload, never on the data, so choosing
it costs nothing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpcore import lazy
from dpcore.errors import ParameterError
from dpcore.estimate import matrix_l1
from dpcore.estimate.matrix_errors import tse_per_p
from dpcore.estimate.matrix_strategy import (
    Strategy,
    _rank_tol,
    hierarchical_strategy,
    identity_strategy,
)
from dpcore.estimate.matrix_workload import (
    FULL_METHOD_MAX_N,
    Workload,
    _kron_all,
    _marginal_spectrum,
    all_range_workload,
)

# SciPy on first use (dpcore.lazy): listing the mechanisms does not import it
sl = lazy.module("scipy.linalg")
minimize = lazy.function("scipy.optimize", "minimize")

__all__ = [
    "eigen_design",
    "marginal_strategy",
    "marginal_closed_form_tse",
    "kron_eigen_design",
    "l1_strategy",
    "design_strategy",
]


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
    """The Eigen-Design strategy of a workload (Li & Miklau 2012, Sec. 3.3, Program 2), sensitivity ``Δ2(A) = 1``.

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
    note += " (Li & Miklau 2012, Sec. 3.5)."
    info = {
        "candidates": errs, "chosen": label, "best_unweighted": ulabel,
        "gain_over_unweighted": gain, "l1_note": note, "design_info": dict(best.info),
    }
    return Strategy(
        best.kind, best.n, A=best.A, factors=best.factors, norm="l1",
        workload_hash=workload.content_hash(), info=info,
    )
