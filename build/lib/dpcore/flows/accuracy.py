"""Expected error per level of an O/D release, from public quantities only (before the data).

Every estimate here uses the plan's noise, the public branching structure and the domain sizes
``N_ℓ`` (the number of possible pairs of tree level ℓ), so it can be shown before a release and
published with it (ours):

* the TopDown RMSE recursion ``V_ℓ = σ_ℓ²(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ²`` (ours, dense regime);
* the typical maximum ``√V_ℓ·√(2 ln N_ℓ)`` (Laplace tails under pure ε);
* InfTDA's guaranteed bound ``B_ℓ(β)``, an explicit-constant form of Boninsegna & Silvestri's
  Theorem 4 ("Differentially private release of hierarchical origin/destination data with a
  TopDown approach", PoPETs 2025 / arXiv 2024), valid for any exact L∞ minimiser;
* the VanillaGauss baseline's error, a sum of finest-pair noises per pair (their Proposition 1,
  with the SD of every pair from the public area sizes).

The curator-only errors against the truth are in :mod:`dpcore.flows.diagnostics`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["expected_max_grouped", "linf_bounds", "topdown_variances", "typical_max", "vanilla_errors"]


def topdown_variances(var: Sequence[float], b: Sequence[float], measured: Sequence[bool]) -> list[float]:
    """Per-cell error variance ``V_ℓ`` of a TopDown release (InfTDA, TopDown L2, the MILP baseline).

    ``V_0`` is the root's noise variance, then ``V_ℓ = σ_ℓ²(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ²`` with
    ``σ_ℓ² = var[ℓ]`` and ``b_ℓ`` the mean number of children (ours: the sum projection
    removes the noise's mean and passes the parent's error down, diluted); a copy level (not
    measured) repeats its parent.
    """
    V = [var[0]]
    for t in range(1, len(var)):
        if not measured[t]:
            V.append(V[t - 1])  # a copy level repeats its parent
        else:
            V.append(var[t] * (1.0 - 1.0 / b[t]) + V[t - 1] / (b[t] * b[t]))
    return V


def linf_bounds(
    scales: Sequence[Any],
    pairs: Sequence[int],
    measured: Sequence[bool],
    *,
    laplace: bool,
    beta: float,
    exact_linf: bool,
) -> list[float]:
    """Bound ``B_ℓ(β)`` on the largest error of every tree level, holding with probability ≥ 1 − β.

    Boninsegna & Silvestri (2024), Theorem 4 with explicit constants (Boninsegna & Silvestri 2025): every level's
    error is at most twice the noise on its ancestors' children plus the ancestor's error, so
    ``B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β))`` for the discrete Gaussian (zCDP) and
    ``2 Σ t_κ ln(2ℓN_κ/β)`` for the discrete Laplace (pure ε), β split over the levels by a union
    bound; a noised total adds its own tail.  Only an exact L∞ minimiser has it (``exact_linf``:
    InfTDA and the MILP baseline); otherwise NaN.  The root is 0 when the total is public.
    """
    bounds = []
    for t in range(len(scales)):
        if not exact_linf or t == 0:  # any exact L∞ minimiser
            bounds.append(0.0 if t == 0 and not measured[0] else math.nan)
            continue
        # union bound: β is split over the t levels (and the noised total, when there is one)
        parts = t + (1 if measured[0] else 0)
        acc = 0.0
        for k in range(1, t + 1):
            if not measured[k]:
                continue
            if laplace:
                acc += float(scales[k]) * math.log(2.0 * parts * pairs[k] / beta)
            else:
                acc += float(scales[k]) * math.sqrt(2.0 * math.log(2.0 * parts * pairs[k] / beta))
        r0 = 0.0
        if measured[0]:  # a noised total adds its own error to every level below
            r0 = (float(scales[0]) * math.log(2.0 * parts / beta) if laplace
                  else float(scales[0]) * math.sqrt(2.0 * math.log(2.0 * parts / beta)))
        bounds.append(2.0 * acc + r0)
    return bounds


def vanilla_errors(
    leaf_var: float,
    leaf_pairs: int,
    pairs: int,
    under_o: np.ndarray,
    under_d: np.ndarray,
    laplace: bool,
) -> tuple[float, float, float]:
    """(RMSE, mean |error|, typical largest |error|) of one level of the VanillaGauss baseline.

    A pair ``(u, v)`` sums ``|u|·|v|`` finest-pair noises of variance ``leaf_var`` (Boninsegna &
    Silvestri 2024, Proposition 1), so the RMSE over the level is
    ``σ_leaf·√(N_T/N_ℓ)``.  ``under_o``/``under_d``: the number of finest areas under every
    origin/destination area of the level.  ``laplace`` marks the finest level under pure ε
    (Laplace tails); above it the sums are taken as normal.
    """
    v = leaf_var * leaf_pairs / pairs  # the average cell sums N_T/N_ℓ leaf noises
    sd = math.sqrt(v)
    if laplace:
        mean_abs = sd * math.sqrt(0.5)
        max_abs = typical_max(sd, pairs, True)
    else:
        # a pair (u, v) sums |u|·|v| leaf noises: its SD follows the public area sizes, and
        # the largest areas dominate the maximum (Texas → Texas is 17× the mean state pair)
        su, cu = np.unique(under_o, return_counts=True)
        sv, cv = np.unique(under_d, return_counts=True)
        sds = math.sqrt(leaf_var) * np.sqrt(np.outer(su, sv).ravel().astype(float))
        w = np.outer(cu, cv).ravel().astype(float)
        mean_abs = float(np.sum(sds * w) / np.sum(w)) * math.sqrt(2.0 / math.pi)
        max_abs = expected_max_grouped(sds, w)
    return sd, mean_abs, max_abs


def expected_max_grouped(sds: np.ndarray, counts: np.ndarray) -> float:
    """``E[max |e|]`` over independent normal errors, ``counts[i]`` of them with SD ``sds[i]``:
    ``∫_0^∞ 1 − Π_i (1 − erfc(t/(s_i√2)))^{c_i} dt`` on a fine grid."""
    from scipy import special

    s = np.asarray(sds, float)
    c = np.asarray(counts, float)
    keep = s > 0
    s, c = s[keep], c[keep]
    if s.size == 0:
        return 0.0
    if c.sum() == 1:
        return float(s[0] * math.sqrt(2.0 / math.pi))
    if s.size > 512:  # group into 512 geometric bins, each at its largest SD (a slight overestimate)
        edges = np.geomspace(s.min(), s.max() * (1 + 1e-12), 513)
        b = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, 511)
        c = np.bincount(b, weights=c, minlength=512)
        s = edges[1:]  # the bin's upper edge: at most 1.7 % above any SD in it
        keep = c > 0
        s, c = s[keep], c[keep]
    top = float(s.max()) * (4.0 + math.sqrt(2.0 * (math.log(c.sum()) + 8.0)))
    t = np.linspace(0.0, top, 2001)
    tail = special.erfc(t[:, None] / (s[None, :] * math.sqrt(2.0)))
    log_none = (np.log1p(-np.minimum(tail, 1 - 1e-16)) * c[None, :]).sum(axis=1)
    p_exceed = -np.expm1(log_none)
    return float(np.sum((p_exceed[1:] + p_exceed[:-1]) * 0.5 * np.diff(t)))


def typical_max(sd: float, n: int, laplace: bool) -> float:
    """Typical largest |error| over ``n`` cells with error SD ``sd``: ``sd·√(2 ln n)`` (normal,
    ours) or ``sd/√2 · ln n`` (Laplace tails); one cell: its mean |error|."""
    if sd <= 0:
        return 0.0
    if n <= 1:
        return sd * (math.sqrt(0.5) if laplace else math.sqrt(2.0 / math.pi))
    return sd * math.log(n) / math.sqrt(2.0) if laplace else sd * math.sqrt(2.0 * math.log(n))
