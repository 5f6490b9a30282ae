"""Unbiased estimates and intervals for any union of cells, from a release's noisy measurements.

A release publishes its noisy measurements *before* post-processing (``measurements.csv``) and
its design (``design.json``): measurement ``i`` is ``y_i = a_iᵀ x + η_i``, where ``x`` are the
true counts of the finest cells, ``a_i`` the 0/1 indicator of the cells it sums, and ``η_i``
independent zero-mean noise of known variance ``σ_i²``.  With ``A`` the stacked rows and
``Σ = diag(σ²)``, the generalised least-squares (GLS) estimate

.. math:: \\hat x = (A^T Σ^{-1} A)^{-1} A^T Σ^{-1} y

is the minimum-variance linear unbiased estimate (Gauss–Markov; it needs only the variances,
so it holds for discrete Laplace and discrete Gaussian noise alike), and the error of any
weighted union ``qᵀx̂`` has variance ``qᵀ(AᵀΣ⁻¹A)⁻¹q`` (Cumings-Menon, "Least Squares
Estimation for Hierarchical Data", arXiv 2404.13164, 2024, §3).

Invariants (public totals held exactly, ``Bx = t``) are kept by equality-constrained GLS:
with ``C = (AᵀΣ⁻¹A)⁻¹`` and ``x̂ᵤ`` the unconstrained estimate,

.. math:: \\hat x = \\hat x_u - C B^T (B C B^T)^{-1} (B \\hat x_u - t), \\quad
          \\operatorname{Var}(q^T \\hat x) = q^T C q - (B C q)^T (B C B^T)^{-1} (B C q)

(the Lagrangian solution; Rao, *Linear Statistical Inference*, 1973, §4a.9).

How ``C b`` is computed, one solve per query:

* on a tree (one measurement per node, every cell a measured leaf, invariants only at the
  roots) exactly, by the two passes of :func:`dpcore.estimate.tree_inference.tree_least_squares`
  (Hay et al., PVLDB 2010, §4): the least-squares fit of the pseudo-observations
  ``y' = σ²_leaf · q`` at the leaves (0 elsewhere) is ``C AᵀΣ⁻¹y' = C q``; a public root
  (variance 0, value 0) gives the constrained ``C q`` directly.  O(nodes · height).
* otherwise by conjugate gradients on the sparse operator ``v ↦ Aᵀ(Σ⁻¹(Av))`` (linear in the
  non-zeros of ``A`` per iteration) with a Jacobi (diagonal) preconditioner
  (Hestenes & Stiefel 1952; Saad, *Iterative Methods for Sparse Linear Systems*, 2003, §9.2).

The interval is ``qᵀx̂ ± z·sd`` with the normal quantile ``z`` where the error's SD is at least
1 (a sum of independent noises, close to normal).  Below SD 1 the error is dominated by few
integer noises and the normal quantile is poor; there the half-width is the exact discrete
quantile of one noise of the measurements' family with the same variance (the smallest integer
``h`` with ``P(|η| ≤ h) ≥ coverage``): exact when the union is one measured cell, an
approximation otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from dpcore.data.synthetic import public_generator
from dpcore.errors import ParameterError
from dpcore.estimate.data_user_format import DESIGN_SCHEMA, measurements_in, read_measurements
from dpcore.estimate.design_nodes import NodeCells, NodeEdges
from dpcore.estimate.tree_inference import SparseTreeFit, tree_least_squares
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.noise import discrete_gaussian_variance

if TYPE_CHECKING:  # SciPy's sparse package is imported where a solve needs it: ~0.5 s a process
    import scipy.sparse as sp

__all__ = [
    "DESIGN_SCHEMA",
    "Measurements",
    "TreeLayout",
    "gls_estimate",
    "laminar_tree",
    "measurements_from",
    "read_release",
    "replicate_variance",
    "replicates",
    "union_interval",
    "union_variance",
]

#: The relative residual at which conjugate gradients stop.
CG_RTOL = 1e-12


@dataclass(frozen=True)
class TreeLayout:
    """The measurements as a tree (for the exact two-pass solve).

    ``parent[v]`` (-1 for roots) and ``depth[v]`` of every node; ``row[v]`` the measurement of
    node ``v`` (-1: not measured); ``cell[v]`` the cell a leaf is (-1 for internal nodes);
    ``public[v]`` the exact value of a root held as an invariant (NaN: none).
    """

    parent: NDArray[np.int64]
    depth: NDArray[np.int64]
    row: NDArray[np.int64]
    cell: NDArray[np.int64]
    public: NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Measurements:
    """Noisy linear measurements ``y = A x + η`` of the finest cells, ``Var η = diag(var)``.

    Parameters
    ----------
    A : scipy.sparse.csr_matrix, shape (m, n)
        Row ``i`` sums the cells measurement ``i`` measures.
    y : array (m,)
        The noisy values.
    var : array (m,)
        The exact noise variance of every measurement (> 0).
    cells : list of str
        The finest cells' codes (columns of ``A``).
    B : scipy.sparse.csr_matrix, shape (k, n), optional
        Invariants: ``B x = t`` holds exactly (public totals).
    t : array (k,), optional
    tree : TreeLayout, optional
        Set when the measurements form a tree (exact two-pass solves).
    families : array of str (m,), optional
        The noise family of every measurement (for the discrete quantile below SD 1).
    """

    A: sp.csr_matrix
    y: NDArray[np.float64]
    var: NDArray[np.float64]
    cells: list[str]
    B: sp.csr_matrix | None = None
    t: NDArray[np.float64] | None = None
    tree: TreeLayout | None = None
    families: NDArray[Any] | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        m, n = self.A.shape
        if np.asarray(self.y).shape != (m,) or np.asarray(self.var).shape != (m,) or len(self.cells) != n:
            raise ParameterError(f"A is {m} x {n}: y and var need {m} entries and cells {n} codes.")
        if not np.all(np.isfinite(self.var) & (np.asarray(self.var) > 0)):
            raise ParameterError("Every measurement's variance must be a positive finite number.")
        coverage = np.asarray(abs(self.A).sum(axis=0)).ravel()
        if np.any(coverage == 0):
            raise ParameterError(f"{int(np.sum(coverage == 0))} cells are in no measurement: their counts "
                                 "cannot be estimated. Drop them or measure them.")

    @property
    def n(self) -> int:
        return self.A.shape[1]

    @property
    def invariants(self) -> int:
        return 0 if self.B is None else self.B.shape[0]

    def index(self, codes: Sequence[str]) -> NDArray[np.int64]:
        """The column of every code (a :class:`ParameterError` names the unknown ones)."""
        pos = self._cache.get("pos")
        if pos is None:
            pos = self._cache["pos"] = {c: i for i, c in enumerate(self.cells)}
        missing = [c for c in codes if c not in pos]
        if missing:
            raise ParameterError(f"{len(missing)} codes are not finest cells of the release (e.g. "
                                 f"{', '.join(map(repr, missing[:3]))}); use codes of release.csv's finest level.")
        return np.fromiter((pos[c] for c in codes), dtype=np.int64, count=len(codes))


# -- solves ------------------------------------------------------------------------------------

def _tree_solve(m: Measurements, b: NDArray[np.float64], y: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """The constrained GLS fit on the tree: with ``y`` the estimate; with ``b`` (``y`` None) ``C b``.
    ``y`` may be a matrix (one row per measurement): then one estimate per column, in one pass."""
    tr = m.tree
    assert tr is not None
    nodes = tr.parent.size
    var = np.full(nodes, np.inf)
    obs = np.zeros((nodes, *(() if y is None else np.shape(y)[1:])))
    meas = tr.row >= 0
    var[meas] = m.var[tr.row[meas]]
    pub = ~np.isnan(tr.public)
    var[pub] = 0.0
    leaf = tr.cell >= 0
    if y is None:  # pseudo-observations σ²·b at the leaves give C b; public roots fixed at 0
        obs[leaf] = var[leaf] * b[tr.cell[leaf]]
    else:
        obs[meas] = y[tr.row[meas]]
        obs[pub] = tr.public[pub] if obs.ndim == 1 else tr.public[pub][:, None]
    est, _ = tree_least_squares(tr.parent, tr.depth, obs, var)
    out = np.empty((m.n, *obs.shape[1:]))
    out[tr.cell[leaf]] = est[leaf]
    return out


def _cg_solve(m: Measurements, b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``C b = (AᵀΣ⁻¹A)⁻¹ b`` by preconditioned conjugate gradients (no invariants)."""
    from scipy.sparse.linalg import LinearOperator, cg

    A = m.A
    At = m._cache.get("At")
    if At is None:
        At = m._cache["At"] = A.T.tocsr()
        m._cache["w"] = 1.0 / m.var
        m._cache["diag"] = np.asarray(A.multiply(A).T @ m._cache["w"]).ravel()
    w, diag = m._cache["w"], m._cache["diag"]
    op = LinearOperator((m.n, m.n), matvec=lambda v: At @ (w * (A @ v)), dtype=np.float64)
    pre = LinearOperator((m.n, m.n), matvec=lambda v: v / diag, dtype=np.float64)
    x, info = cg(op, b, rtol=CG_RTOL, atol=0.0, maxiter=20 * m.n + 100, M=pre)
    if info != 0:
        raise ParameterError(f"Conjugate gradients did not converge ({info} iterations): the design is "
                             "ill-conditioned; check that every cell is measured.")
    return x


def _c_times(m: Measurements, b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``C b`` with ``C`` the covariance of the constrained GLS estimate (conjugate gradients; a
    tree's is :func:`_tree_solve` with ``y`` None, or :func:`_quadratic` for ``bᵀCb``)."""
    cb = _cg_solve(m, b)
    if m.invariants:
        cbt, gram = _invariant_factors(m)
        cb = cb - cbt @ np.linalg.solve(gram, cbt.T @ b)
    return cb


def _quadratic(m: Measurements, w: NDArray[np.float64]) -> float:
    """``wᵀ C w`` (not below 0).  On a tree only ``w``'s cells and their ancestors enter the two
    passes (:class:`~dpcore.estimate.tree_inference.SparseTreeFit`): a query costs
    O(cells in the union · height), not O(nodes · height)."""
    if m.tree is None:
        return max(float(w @ _c_times(m, w)), 0.0)
    tr = m.tree
    fit = m._cache.get("sparse_fit")
    if fit is None:
        var = np.full(tr.parent.size, np.inf)
        meas = tr.row >= 0
        var[meas] = m.var[tr.row[meas]]
        var[~np.isnan(tr.public)] = 0.0
        leaf_of = np.empty(m.n, dtype=np.int64)
        leaf_of[tr.cell[tr.cell >= 0]] = np.flatnonzero(tr.cell >= 0)
        fit = m._cache["sparse_fit"] = (SparseTreeFit(tr.parent, tr.depth, var), leaf_of)
    solver, leaf_of = fit
    cells = np.flatnonzero(w)
    nodes = leaf_of[cells]
    cw = solver.at(nodes, solver.var[nodes] * w[cells])  # pseudo-observations σ²·w give C w
    return max(float(w[cells] @ cw), 0.0)


def _invariant_factors(m: Measurements) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``C Bᵀ`` (n x k) and ``B C Bᵀ`` (k x k) of the unconstrained ``C``, cached (k solves)."""
    if "cbt" not in m._cache:
        assert m.B is not None
        Bd = m.B.toarray()
        cbt = np.column_stack([_cg_solve(m, row) for row in Bd])
        m._cache["cbt"], m._cache["gram"] = cbt, Bd @ cbt
    return m._cache["cbt"], m._cache["gram"]


def gls_estimate(m: Measurements) -> NDArray[np.float64]:
    """The (constrained) GLS estimate ``x̂`` of every finest cell.

    Examples
    --------
    A total (19) over two cells measured as 7 and 10, all unit variances:

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> m = Measurements(A, np.array([19.0, 7.0, 10.0]), np.ones(3), ["a", "b"])
    >>> gls_estimate(m).round(4).tolist()
    [7.6667, 10.6667]
    >>> mc = Measurements(A[1:], np.array([7.0, 10.0]), np.ones(2), ["a", "b"],
    ...                   B=A[:1], t=np.array([15.0]))  # the total 15 is public
    >>> gls_estimate(mc).round(4).tolist()
    [6.0, 9.0]
    """
    if "estimate" in m._cache:
        return m._cache["estimate"]
    if m.tree is not None:
        x = _tree_solve(m, np.zeros(m.n), np.asarray(m.y, float))
    else:
        x = _cg_solve(m, m.A.T @ (np.asarray(m.y, float) / m.var))
        if m.invariants:
            cbt, gram = _invariant_factors(m)
            x = x - cbt @ np.linalg.solve(gram, m.B @ x - m.t)
    m._cache["estimate"] = x
    return x


def _weights(m: Measurements, q: ArrayLike | Sequence[str]) -> NDArray[np.float64]:
    """A union as a weight vector: codes (weight 1), ``{code: weight}`` or a dense vector."""
    if isinstance(q, dict):
        w = np.zeros(m.n)
        np.add.at(w, m.index(list(q)), np.asarray(list(q.values()), float))
        return w
    arr = np.asarray(q)
    if arr.dtype.kind in "US" or arr.dtype == object:
        w = np.zeros(m.n)
        w[m.index([str(c) for c in arr])] = 1.0  # a union: a code listed twice still counts once
        return w
    if arr.shape != (m.n,):
        raise ParameterError(f"A union is a list of cell codes or a weight vector of {m.n} entries.")
    return arr.astype(float)


def union_variance(m: Measurements, q: ArrayLike | Sequence[str]) -> float:
    """``Var(qᵀx̂) = qᵀ C q`` (constrained GLS): one solve.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> m = Measurements(A, np.array([19.0, 7.0, 10.0]), np.ones(3), ["a", "b"])
    >>> round(union_variance(m, ["a"]), 4), round(union_variance(m, ["a", "b"]), 4)
    (0.6667, 0.6667)
    """
    return _quadratic(m, _weights(m, q))


def _discrete_half_width(var: float, family: str, coverage: float) -> int:
    """The smallest integer ``h`` with ``P(|η| ≤ h) ≥ coverage`` for one noise of ``family`` with
    variance ``var``: the scale with that variance, then the exact quantile of
    :func:`dpcore.privacy.calibration.interval_half_width`."""
    if var <= 0:
        return 0
    if family == "discrete_laplace":  # var = 2p/(1-p)^2  =>  p = ((var+1) - sqrt(2 var + 1)) / var, t = -1/ln p
        p = ((var + 1.0) - math.sqrt(2.0 * var + 1.0)) / var
        return int(interval_half_width("discrete_laplace", -1.0 / math.log(p), coverage))
    lo, hi = 1e-3, 2.0  # σ with the discrete Gaussian's variance equal to var (< 1 here)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if discrete_gaussian_variance(mid) < var else (lo, mid)
    return int(interval_half_width("discrete_gaussian", 0.5 * (lo + hi), coverage))


def union_interval(m: Measurements, q: ArrayLike | Sequence[str], coverage: float = 0.9, *,
                   estimate: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """The estimate of a weighted union of cells, its SD and a ``coverage`` interval.

    ``q``: cell codes (weight 1 each), ``{code: weight}``, or a weight vector over ``m.cells``.
    Normal quantile where the SD is at least 1, the exact discrete quantile below (module
    docstring).  Returns ``estimate, variance, sd, low, high, coverage, method``.  ``estimate``:
    :func:`gls_estimate` of ``m`` when already solved (one solve for many unions).

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.eye(2))
    >>> m = Measurements(A, np.array([40.0, 60.0]), np.full(2, 25.0), ["a", "b"])
    >>> r = union_interval(m, ["a", "b"], 0.9)
    >>> r["estimate"], round(r["sd"], 4), round(r["low"], 2), round(r["high"], 2), r["method"]
    (100.0, 7.0711, 88.37, 111.63, 'normal')
    """
    if not 0.0 < coverage < 1.0:
        raise ParameterError(f"The coverage must be between 0 and 1 (got {coverage}); e.g. 0.9.")
    w = _weights(m, q)
    est = float(w @ (gls_estimate(m) if estimate is None else estimate))
    var = _quadratic(m, w)
    sd = math.sqrt(var)
    if sd >= 1.0:
        half, method = float(interval_half_width("normal", sd, coverage)), "normal"
    else:
        fam = "discrete_gaussian"
        if m.families is not None and len(m.families) and np.all(m.families == "discrete_laplace"):
            fam = "discrete_laplace"
        half, method = float(_discrete_half_width(var, fam, coverage)), f"exact {fam} quantile"
    return {"estimate": est, "variance": var, "sd": sd, "low": est - half, "high": est + half,
            "coverage": coverage, "method": method}


# -- replicates --------------------------------------------------------------------------------

def replicates(m: Measurements, R: int = 80, seed: int = 0, *,
               estimate: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """``R`` data-free replicate columns of the estimate, shape ``(n, R)``.

    Replicate ``r`` is ``x̂ + e⁽ʳ⁾`` with ``e⁽ʳ⁾`` the GLS fit of pure noise
    ``z⁽ʳ⁾ ~ N(0, Σ)`` (invariants held at 0): it has the covariance of ``x̂``'s error, so for
    any union ``U`` the spreadsheet formula ``Var = (1/R) Σ_r (rep_r(U) − est(U))²`` estimates
    ``Var(est(U))`` with relative SD ``√(2/R)`` (16 % at R = 80; of the SD, 8 %).  The draws
    are a public function of the design and the (recorded, non-secret) ``seed``, never of the
    data: post-processing, no budget (the ACS convention of 80 replicates, ACS Design and
    Methodology 2014, ch. 12).

    Worked example: a cell ``a`` with estimate 5.0 and replicates 6.0, 3.0, 5.5, 4.5 (R = 4)
    has ``Var = (1² + 2² + 0.5² + 0.5²)/4 = 1.375``, SD 1.17; a union sums the replicate
    columns row-wise first, then applies the same formula.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.eye(2))
    >>> m = Measurements(A, np.array([5.0, 7.0]), np.full(2, 4.0), ["a", "b"])
    >>> reps = replicates(m, R=2000, seed=1)
    >>> reps.shape, bool(abs(replicate_variance(m, reps, ["a", "b"]) / 8.0 - 1) < 0.1)
    ((2, 2000), True)
    """
    if int(R) < 2:
        raise ParameterError("Replicates need R >= 2 columns (80 is the ACS convention).")
    rng, _ = public_generator(seed)  # not privacy noise: data-free, public and reproducible
    est = gls_estimate(m) if estimate is None else estimate  # a caller that has it solves once
    out = np.empty((m.n, int(R)))
    sd = np.sqrt(m.var)
    if m.tree is not None:  # the fit is affine in y: its linear part applied to z, all columns in one pass
        base = _tree_solve(m, np.zeros(m.n), np.zeros(m.var.size))
        z = np.empty((m.var.size, int(R)))
        for r in range(int(R)):  # column by column: the same draws as one solve per replicate
            z[:, r] = rng.standard_normal(m.var.size) * sd
        out[:] = est[:, None] + (_tree_solve(m, np.zeros(m.n), z) - base[:, None])
        return out
    for r in range(int(R)):
        z = rng.standard_normal(m.var.size) * sd
        e = _cg_solve(m, m.A.T @ (z / m.var))
        if m.invariants:
            cbt, gram = _invariant_factors(m)
            e = e - cbt @ np.linalg.solve(gram, m.B @ e)
        out[:, r] = est + e
    return out


def replicate_variance(m: Measurements, reps: NDArray[np.float64], q: ArrayLike | Sequence[str]) -> float:
    """``(1/R) Σ_r (qᵀrep_r − qᵀx̂)²``: the replicate variance of a union (see :func:`replicates`)."""
    w = _weights(m, q)
    dev = w @ reps - w @ gls_estimate(m)
    return float(np.mean(dev * dev))


# -- reading a release's files ------------------------------------------------------------------

def _tree_layout(design: Mapping[str, Any], nodes: NodeCells, ids: NDArray[np.int64],
                 inv_ids: NDArray[np.int64], inv_values: Sequence[float]) -> TreeLayout | None:
    """The tree of a design with ``edges`` (``ids``: the node of every measurement; ``inv_ids`` and
    ``inv_values``: the node and value of every invariant), or None when the exact two-pass solve
    does not apply.

    The caller has looked up every measurement's and invariant's node in ``nodes``
    (:func:`measurements_from` refuses unknown ones with a ParameterError); a position outside them
    here is a bug (RuntimeError): -1 would index the last node silently."""
    edges = design.get("edges")
    if not edges:
        return None
    k = len(nodes)
    pos = np.concatenate([ids, inv_ids]).astype(np.int64, copy=False)
    if pos.size and (int(pos.min()) < 0 or int(pos.max()) >= k):
        raise RuntimeError(f"_tree_layout: internal error: a node position is outside 0..{k - 1} "
                           "(measurements_from looks up the measurements' and invariants' nodes first).")

    def ids_of(values: Any) -> NDArray[np.int64]:
        out = nodes.positions([str(x) for x in values])
        if (out < 0).any():
            raise KeyError(str(np.asarray(values, dtype=object)[out < 0][0]))
        return out

    parent = np.full(k, -1, dtype=np.int64)
    # edges a writer made with these nodes (the files being written, not read): node positions already,
    # and built from the nodes' own cell lists, so they agree with them by construction
    made_here = isinstance(edges, NodeEdges) and edges.nodes is nodes
    if made_here:
        parent[edges.child] = edges.parent
    else:
        pairs = np.asarray(edges, dtype=object).reshape(-1, 2)
        parent[ids_of(pairs[:, 1])] = ids_of(pairs[:, 0])
    row = np.full(k, -1, dtype=np.int64)
    if ids.size and np.bincount(ids, minlength=k).max() > 1:
        return None  # a node measured twice: conjugate gradients
    row[ids] = np.arange(len(ids))
    has_kids = np.bincount(parent[parent >= 0], minlength=k) > 0
    cell = np.full(k, -1, dtype=np.int64)
    leaves = np.flatnonzero(~has_kids)
    if (nodes.sizes[leaves] != 1).any() or (row[leaves] < 0).any():
        return None
    cell[leaves] = nodes.cells[nodes.ptr[leaves]]
    if not np.array_equal(np.sort(cell[cell >= 0]), np.arange(len(design["cells"]))):
        return None  # the leaves are not the cells, each once
    public = np.full(k, np.nan)
    for v, value in zip(inv_ids.tolist(), inv_values, strict=True):
        if parent[v] != -1:
            return None
        public[v] = value
    depth = np.zeros(k, dtype=np.int64)
    for _ in range(k + 1):  # depth by repeated relaxation (trees are shallow)
        new = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    else:
        return None  # a cycle: not a tree
    if not made_here and not _edges_give_node_cells(parent, depth, cell, nodes):
        return None  # the two passes would fit the edges' tree, not A's rows: conjugate gradients
    return TreeLayout(parent, depth, row, cell, public)


def _edges_give_node_cells(parent: NDArray[np.int64], depth: NDArray[np.int64], cell: NDArray[np.int64],
                           nodes: NodeCells) -> bool:
    """Whether every node lists exactly the cells of the leaves under it in the edges' forest (the
    leaves being the cells, each once).  A design.json the writers made always agrees; a file
    edited by hand may not (a node under two parents keeps the last one): O(cells · height)."""
    k, height = parent.size, int(depth.max()) + 1
    under = (cell >= 0).astype(np.int64)  # leaves under each node, summed up from the deepest level
    for d in range(height - 1, 0, -1):
        at = np.flatnonzero(depth == d)
        under += np.bincount(parent[at], weights=under[at], minlength=k).astype(np.int64)
    if not np.array_equal(under, nodes.sizes):
        return False
    listed = nodes.cells
    n = int(cell.max()) + 1
    if listed.size and (int(listed.min()) < 0 or int(listed.max()) >= n):
        return False
    # above[d, c]: the node at depth d over cell c's leaf (-1 below that leaf)
    above = np.full((height, n), -1, dtype=np.int64)
    cur = np.empty(n, dtype=np.int64)
    cur[cell[cell >= 0]] = np.flatnonzero(cell >= 0)
    for d in range(height - 1, -1, -1):
        at = depth[cur] == d
        above[d, at] = cur[at]
        cur[at] = parent[cur[at]]
    owner = np.repeat(np.arange(k, dtype=np.int64), nodes.sizes)
    if not np.array_equal(above[depth[owner], listed], owner):
        return False
    # every listed cell lies under its node and the counts agree: the lists are the leaves' cells unless
    # a node lists one cell twice (then one (depth, cell) pair repeats)
    return not listed.size or int(np.bincount(depth[owner] * n + listed).max()) <= 1


def laminar_tree(A: sp.csr_matrix, B: sp.csr_matrix | None = None,
                 t: NDArray[np.float64] | None = None) -> TreeLayout | None:
    """The tree of a design whose rows are nested sets (a laminar family), found from ``A`` alone.

    At each cell, the rows containing it sorted by size (larger first, ties by row order: a node
    with one child measures the same set twice) form a chain; the design is a tree exactly when
    every row has the same next-larger row at each of its cells (its parent), and every row
    without children measures one cell, each cell once (the leaves).  One invariant over all cells (a public
    total) becomes a public root above the others; other invariants: None (conjugate gradients).

    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float))
    >>> laminar_tree(A).parent.tolist()
    [-1, 0, 1, 1, 0]
    >>> laminar_tree(sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)))
    """
    m, n = A.shape
    coo = A.tocoo()
    if np.any(coo.data != 1.0):
        return None
    size = np.bincount(coo.row, minlength=m)
    order = np.lexsort((coo.row, -size[coo.row], coo.col))  # by cell, larger rows first, then row order
    r, c = coo.row[order], coo.col[order]
    same = c[1:] == c[:-1]
    parent = np.full(m, -1, dtype=np.int64)
    parent[r[1:][same]] = r[:-1][same]
    cand = np.full(r.size, -1, dtype=np.int64)  # every entry's next-larger row at its cell
    cand[1:][same] = r[:-1][same]
    if np.any(cand != parent[r]):
        return None  # not nested
    leaf = np.bincount(parent[parent >= 0], minlength=m) == 0
    if np.any(size[leaf] != 1) or np.unique(coo.col[leaf[coo.row]]).size != n or leaf.sum() != n:
        return None  # every cell must be one leaf, measured alone
    public = np.full(m, np.nan)
    if B is not None and B.shape[0]:
        if B.shape[0] != 1 or B.nnz != n or np.any(B.data != 1.0) or t is None:
            return None
        parent = np.r_[np.where(parent < 0, m, parent), -1]
        public = np.r_[public, float(t[0])]
    k = parent.size
    depth = np.zeros(k, dtype=np.int64)
    for _ in range(k):
        new = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    row = np.r_[np.arange(m), np.full(k - m, -1)].astype(np.int64)
    cell = np.full(k, -1, dtype=np.int64)
    on_leaf = leaf[coo.row]
    cell[coo.row[on_leaf]] = coo.col[on_leaf]
    return TreeLayout(parent, depth, row, cell, public)


def read_release(folder: Any) -> Measurements:
    """The measurements of a release folder (``measurements.csv`` or ``measurements.parquet``, and
    ``design.json``).

    Invariants of the design become ``B x = t``; when the design has ``edges`` forming a tree
    with one measurement per node, every cell a leaf and invariants only at roots, the exact
    two-pass solve is used (:class:`TreeLayout`).
    """
    folder = Path(folder)
    design = orjson.loads((folder / "design.json").read_bytes()) if (folder / "design.json").is_file() else None
    name = measurements_in([p.name for p in folder.glob("measurements.*")], design) if design is not None else None
    if name is None:
        raise ParameterError(f"{folder} has no design.json and measurements.csv (or measurements.parquet): "
                             + (_not_offered_why(folder) or "give the --out folder of a release made by a version "
                                "that writes the data users' files."))
    return measurements_from(design, read_measurements(folder / name))


def _not_offered_why(folder: Path) -> str | None:
    """Why the release in ``folder`` wrote no data users' files, as its ``release.json`` says
    (``data_users.why``), with the words to read it by; None when it does not say."""
    try:
        users = orjson.loads((folder / "release.json").read_bytes()).get("data_users") or {}
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    why = users.get("why") if isinstance(users, dict) and users.get("measurements_offered") is False else None
    return f"this release offers no data users' files, because {why}" if isinstance(why, str) and why else None


def measurements_from(design: Mapping[str, Any], meas: pd.DataFrame) -> Measurements:
    """:class:`Measurements` from a parsed ``design.json`` and ``measurements.csv`` (count phase)."""
    import scipy.sparse as sp

    if design.get("schema") != DESIGN_SCHEMA:
        raise ParameterError(f"design.json is not {DESIGN_SCHEMA} (got {design.get('schema')!r}).")
    count = (meas["phase"] == "count").to_numpy()
    if not count.all():  # a copy of every column only where another phase is there to drop
        meas = meas[count]
    nodes = NodeCells.of(design["nodes"])  # arrays: indicator rows are slices of them
    cells = [str(c) for c in design["cells"]]
    n = len(cells)

    def positions(codes: Sequence[str]) -> NDArray[np.int64]:
        pos = nodes.positions(codes)
        if (pos < 0).any():
            unknown = codes[int(np.flatnonzero(pos < 0)[0])]
            raise ParameterError(f"measurements.csv names nodes design.json does not list (e.g. {unknown!r}).")
        return pos

    def indicator(pos: NDArray[np.int64]) -> sp.csr_matrix:
        indptr, ind = nodes.rows(pos)
        return sp.csr_matrix((np.ones(ind.size), ind, indptr), shape=(pos.size, n))

    rows = positions(meas["node"].astype(str).to_numpy())  # the node of every measurement
    inv = design.get("invariants", [])
    inv_rows = positions([str(v["node"]) for v in inv])
    values = [float(v["value"]) for v in inv]
    A = indicator(rows)
    B = indicator(inv_rows) if inv else None
    t = np.array(values) if inv else None
    tree = _tree_layout(design, nodes, rows, inv_rows, values)
    if tree is None and not design.get("edges"):
        tree = laminar_tree(A, B, t)
    return Measurements(A, meas["value"].to_numpy(float), meas["variance"].to_numpy(float), cells, B=B, t=t,
                        tree=tree, families=meas["family"].astype(str).to_numpy())
