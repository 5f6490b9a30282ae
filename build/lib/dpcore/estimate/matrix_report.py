"""Pre-release error report of the matrix mechanism (Li & Miklau, PVLDB 2012, Sec. 2.4).

Everything here is data-free: it reads the public workload, the strategy and the budget,
never the counts, so it can be shown before anything is spent.  For every query ``w`` of the
workload and a strategy ``A`` whose answers get noise of variance ``Var(z)`` (from
:func:`dpcore.estimate.matrix_release.calibrate`, the same calibration the release draws with), the
answer's variance is ``v = Var(z) · w X⁺ wᵀ`` with ``X = AᵀA`` (§3.3).  The report gives

* the RMSE per query group ``sqrt(mean v)`` (spec P15: unweighted, even when the workload's
  rows were weighted for the design) and the worst query's standard error;
* a 95 % simultaneous bound: with probability at least 95 % *no* answer is off by more than
  ``t``.  It is Bonferroni's union bound over the ``m`` queries with the normal tail,
  ``t = z_{1−0.05/(2m)} · max_i sqrt(v_i)``; the noise is treated as normal (for the discrete
  Gaussian, which is σ-sub-Gaussian (Canonne, Kamath & Steinke 2020), the rigorous bound
  ``t = sqrt(2 ln(2m/0.05)) · σ · max_i sqrt(w_i X⁺ w_iᵀ)`` is given as well; for Laplace noise
  the normal tail is an approximation);
* the same errors for other strategies under the same budget: the identity (noisy cells,
  ``TSE/P = trace(G)``), the Gaussian (or Laplace) mechanism applied directly to ``W`` (spec
  T2: ``m Δ(W)²``), a binary hierarchical strategy (per axis, Kronecker on grids) and, when
  :mod:`dpcore.estimate.matrix_l1` provides ``haar_strategy``, the Haar wavelet;
* the standard error against the query's size (cells), for a plot.

Queries are handled in *atoms* (a set of queries with one size and one group, with the sum,
max and min of ``w X⁺ wᵀ``) so that all ``(n(n+1)/2)²`` rectangles of a 256 × 256 grid never
have to be listed: on a Kronecker strategy the rectangles of side lengths ``(l1, l2)`` form one
atom whose sums and extremes are products of per-axis ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcore.errors import DPCoreError
from dpcore.estimate import matrix_errors, matrix_release, matrix_strategy, matrix_workload
from dpcore.privacy.calibration import normal_z

__all__ = ["Atoms", "Candidate", "Profile", "profile", "report", "se_vs_size_figure", "SIM_ALPHA"]

#: Level of the simultaneous bound (95 %).
SIM_ALPHA = 0.05
#: Largest workload whose queries are listed one by one (others must be all ranges / rectangles).
MAX_LISTED = 200_000
#: Most points of the standard-error-against-size curve (kept in the plan and the release record).
MAX_SIZE_POINTS = 120

LABELS = {
    "this": "this strategy",
    "identity": "identity (noisy cells)",
    "direct": "noise on each query (Gaussian on W)",
    "hierarchical": "hierarchical (binary tree)",
    "haar": "Haar wavelet",
}

SHORT = {"this": "this strategy", "identity": "identity", "direct": "Gaussian on W",
         "hierarchical": "hierarchical", "haar": "Haar"}


@dataclass(frozen=True)
class Atoms:
    """Queries in atoms of equal size and group: ``count`` queries of ``size`` cells in group
    ``group`` (an index into :attr:`Profile.groups`), with the sum / max / min of ``w X⁺ wᵀ``."""

    size: np.ndarray
    group: np.ndarray
    count: np.ndarray
    qsum: np.ndarray
    qmax: np.ndarray
    qmin: np.ndarray


@dataclass(frozen=True)
class Candidate:
    """A strategy to compare: ``strategy`` carries the sensitivity profile the noise is
    calibrated to (for the identity and the direct mechanism a one-column stand-in with the same
    ``Δ1``, ``Δ2`` and column support)."""

    key: str
    label: str
    strategy: matrix_strategy.Strategy
    atoms: Atoms


@dataclass(frozen=True)
class Profile:
    """The budget-free part of the report (memoise it per workload and strategy)."""

    m: int
    n: int
    groups: tuple[str, ...]
    grouped_by: str
    candidates: tuple[Candidate, ...]
    skipped: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# quadratic forms per query
# ---------------------------------------------------------------------------------------------


def _pinv(s: matrix_strategy.Strategy) -> np.ndarray:
    """``X⁺`` of a flat strategy (``n × n``) through its memoised factor (never ``np.linalg.pinv``)."""
    Z = s.whiten(np.eye(s.n))  # Zᵀ: column j is Zᵀ e_j
    return Z.T @ Z


def _range_atoms_1d(s: matrix_strategy.Strategy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per range length ``l = 1..n``: count, Σ, max, min of ``q X⁺ qᵀ`` over the ranges of length l.

    ``q X⁺ qᵀ`` of the range ``[a, b)`` is the sum of the ``[a, b) × [a, b)`` block of ``X⁺``:
    four lookups in its 2-D prefix sums.
    """
    n = s.n
    P = np.zeros((n + 1, n + 1))
    P[1:, 1:] = _pinv(s).cumsum(axis=0).cumsum(axis=1)
    lengths = np.arange(1, n + 1)
    cnt = n - lengths + 1
    tot, mx, mn = np.empty(n), np.empty(n), np.empty(n)
    d = np.diagonal(P)
    for i, ln in enumerate(lengths):
        a = np.arange(n - ln + 1)
        q = d[a + ln] - P[a, a + ln] - P[a + ln, a] + d[a]
        tot[i], mx[i], mn[i] = q.sum(), q.max(), q.min()
    return lengths, cnt.astype(float), tot, mx, mn


def _size_class(size: np.ndarray) -> np.ndarray:
    """0 for one cell, j for ``4^(j-1) < size <= 4^j``."""
    s = np.asarray(size, dtype=np.float64)
    return np.where(s <= 1, 0, np.ceil(np.log(s) / np.log(4) - 1e-12)).astype(np.int64)


def _class_label(j: int) -> str:
    return "1 cell" if j == 0 else f"{4 ** (j - 1) + 1:,}–{4 ** j:,} cells"


def _ranges_atoms(per_axis: list[tuple[np.ndarray, ...]]) -> Atoms:
    """Atoms of all ranges (1 axis) or all rectangles (2 axes, Kronecker: products per axis)."""
    if len(per_axis) == 1:
        ln, cnt, tot, mx, mn = per_axis[0]
        size = ln.astype(float)
        return Atoms(size, _size_class(size), cnt, tot, mx, mn)
    (l1, c1, t1, x1, n1), (l2, c2, t2, x2, n2) = per_axis
    size = np.multiply.outer(l1, l2).ravel().astype(float)
    return Atoms(size, _size_class(size), np.multiply.outer(c1, c2).ravel(), np.multiply.outer(t1, t2).ravel(),
                 np.multiply.outer(x1, x2).ravel(), np.multiply.outer(n1, n2).ravel())


def _closed_atoms(shape: tuple[int, ...], per_length_q) -> list[tuple[np.ndarray, ...]]:
    """Per axis atoms when ``q`` depends only on the length (identity: q = l; direct: q = 1)."""
    out = []
    for n in shape:
        ln = np.arange(1, n + 1)
        cnt = (n - ln + 1).astype(float)
        q = per_length_q(ln).astype(float)
        out.append((ln, cnt, q * cnt, q, q))
    return out


def _list_atoms(size: np.ndarray, group: np.ndarray, q: np.ndarray) -> Atoms:
    one = np.ones(len(q))
    return Atoms(np.asarray(size, dtype=float), np.asarray(group, dtype=np.int64), one, q, q, q)


def _listed_sizes(w: matrix_workload.Workload) -> np.ndarray:
    if w.rects is not None:
        r = np.asarray(w.rects)
        return ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).astype(float)
    return (w.matrix() != 0).sum(axis=1).astype(float)


def _coverage_max(w: matrix_workload.Workload) -> list[int]:
    """``max_j`` number of queries containing cell ``j`` (``Δ2(W)²`` = ``Δ1(W)`` of a 0/1 ``W``),
    per axis for all rectangles (the count is a product there)."""
    if w.factors:
        return [int(max((i + 1) * (f.n - i) for i in range(f.n))) for f in w.factors]
    if w.spec.get("family") == "all_range":
        return [int(max((i + 1) * (w.n - i) for i in range(w.n)))]
    if w.rects is not None:
        n1, n2 = w.shape
        D = np.zeros((n1 + 1, n2 + 1), dtype=np.int64)
        r = np.asarray(w.rects, dtype=np.int64)
        np.add.at(D, (r[:, 0], r[:, 2]), 1)
        np.add.at(D, (r[:, 1], r[:, 2]), -1)
        np.add.at(D, (r[:, 0], r[:, 3]), -1)
        np.add.at(D, (r[:, 1], r[:, 3]), 1)
        return [int(D.cumsum(0).cumsum(1)[:n1, :n2].max())]
    return [int((w.matrix() != 0).sum(axis=0).max())]


def _stand_in(counts: list[int], norm: str) -> matrix_strategy.Strategy:
    """A strategy with the sensitivity profile of a 0/1 matrix whose fullest column has
    ``prod(counts)`` ones: ``Δ1 = support = c``, ``Δ2 = sqrt(c)`` (what calibration reads)."""
    facs = tuple(matrix_strategy.Strategy("stand-in", 1, A=np.ones((c, 1)), norm=norm) for c in counts)
    if len(facs) == 1:
        return facs[0]
    return matrix_strategy.Strategy("kron", 1, factors=facs, norm=norm)


def _haar_maker():
    try:
        from dpcore.estimate.matrix_l1 import haar_strategy  # written alongside; optional
    except ImportError:
        return None
    return haar_strategy


def profile(workload: matrix_workload.Workload, strategy: matrix_strategy.Strategy, *, pure: bool,
            groups: list[str] | None = None, this_label: str | None = None) -> Profile:
    """The budget-free error profile of ``strategy`` and the comparison strategies.

    ``workload`` is the (unweighted) set of queries answered: all rectangles of a grid
    (:func:`~dpcore.estimate.matrix_workload.range_2d_workload`), all ranges of a line, or a listable set of
    queries (rectangles, prefixes).  ``groups`` labels each query of a listable workload; without
    it queries are grouped by size class (1 cell, 2–4, 5–16, ... cells).
    """
    norm = "l1" if pure else "l2"
    ranges = bool(workload.factors) or workload.spec.get("family") == "all_range"
    if not ranges and workload.m > MAX_LISTED:
        raise DPCoreError(f"The workload has {workload.m:,} queries; the error report lists at most "
                          f"{MAX_LISTED:,}.")
    shape = tuple(f.n for f in workload.factors) if workload.factors else (workload.n,)
    if ranges:
        sizes = None
        grp_codes = None
        group_names: tuple[str, ...] = ()
        grouped_by = "size"
    else:
        sizes = _listed_sizes(workload)
        if groups is not None:
            if len(groups) != workload.m:
                raise DPCoreError(f"{len(groups)} group labels for {workload.m} queries.")
            group_names = tuple(dict.fromkeys(groups))
            index = {g: i for i, g in enumerate(group_names)}
            grp_codes = np.array([index[g] for g in groups], dtype=np.int64)
            grouped_by = "group"
        else:
            grp_codes = _size_class(sizes)
            group_names = ()
            grouped_by = "size"

    def atoms_of(s: matrix_strategy.Strategy) -> Atoms:
        if ranges:
            axes = list(s.factors) if s.factors else [s]
            if len(axes) != len(shape) or any(a.n != n for a, n in zip(axes, shape, strict=True)):
                raise DPCoreError("The strategy does not match the workload's axes.")
            return _ranges_atoms([_range_atoms_1d(a) for a in axes])
        q = matrix_errors.query_variances_per_p(workload, s) / s.sensitivity() ** 2
        return _list_atoms(sizes, grp_codes, q)

    def closed(q_of_len, q_of_size) -> Atoms:
        if ranges:
            return _ranges_atoms(_closed_atoms(shape, q_of_len))
        return _list_atoms(sizes, grp_codes, q_of_size(sizes))

    kind = strategy.kind + (f"-{strategy.factors[0].kind}" if strategy.factors else "")
    cands = [Candidate("this", this_label or f"{LABELS['this']} ({kind})", strategy, atoms_of(strategy))]
    unit = matrix_strategy.Strategy("stand-in", 1, A=np.ones((1, 1)), norm=norm)
    cands.append(Candidate("identity", LABELS["identity"], unit,
                           closed(lambda ln: ln, lambda sz: sz)))
    direct = LABELS["direct"] if not pure else "noise on each query (Laplace on W)"
    cands.append(Candidate("direct", direct, _stand_in(_coverage_max(workload), norm),
                           closed(lambda ln: np.ones_like(ln), lambda sz: np.ones_like(sz))))
    skipped = []
    makers = [("hierarchical", matrix_strategy.hierarchical_strategy)]
    haar = _haar_maker()
    if haar is not None:
        makers.append(("haar", haar))
    else:
        skipped.append("Haar wavelet (not available)")
    axes_n = shape if (ranges or len(workload.shape) == 1) else tuple(workload.shape)
    for key, make in makers:
        try:
            parts = tuple(make(int(n)) for n in axes_n)
            parts = tuple(matrix_strategy.Strategy(p.kind, p.n, A=p.A, norm=norm) for p in parts)
            s = parts[0] if len(parts) == 1 else matrix_strategy.Strategy("kron", workload.n, factors=parts, norm=norm)
            if kind == (f"kron-{parts[0].kind}" if s.factors else s.kind):
                continue  # the strategy itself (the pure-ε fallback): already listed
            cands.append(Candidate(key, LABELS[key] + (" per axis" if len(parts) > 1 else ""), s, atoms_of(s)))
        except (DPCoreError, ValueError, MemoryError) as e:  # e.g. a size the construction refuses
            skipped.append(f"{LABELS[key]} ({e})")
    if grouped_by == "size":
        present = sorted(set(np.unique(cands[0].atoms.group).tolist()))
        group_names = tuple(_class_label(j) for j in range(max(present) + 1))
    return Profile(m=int(workload.m), n=int(workload.n), groups=group_names, grouped_by=grouped_by,
                   candidates=tuple(cands), skipped=tuple(skipped))


# ---------------------------------------------------------------------------------------------
# the report for a budget
# ---------------------------------------------------------------------------------------------


def _summ(a: Atoms, var: float) -> dict[str, float]:
    cnt = a.count.sum()
    return {"rmse": math.sqrt(var * a.qsum.sum() / cnt), "worst_se": math.sqrt(var * a.qmax.max()),
            "best_se": math.sqrt(var * a.qmin.min())}


def report(prof: Profile, *, epsilon: float | None = None, rho: float | None = None,
           delta: float | None = None, calibration: str = "analytic") -> dict[str, Any]:
    """The error report for a budget (per sensitivity-1 change: the caller divides ε by the
    unit of privacy's ``k``, ρ by ``k²``).  Returns plain JSON-able values.

    Keys: ``m``; ``rmse``; ``worst_se``; ``simultaneous_95`` (bound, method, z); ``groups`` (one
    row per group: queries, RMSE, worst SE, RMSE of each comparison strategy); ``comparisons``
    (one row per strategy: RMSE, worst SE, ratio to this strategy); ``by_size`` (per query size
    in cells: RMS, min and max SE of this strategy, RMS SE of each comparison); ``skipped``.
    """
    budget = {"epsilon": epsilon, "rho": rho, "delta": delta, "calibration": calibration}
    cals = {c.key: matrix_release.calibrate(c.strategy, **budget) for c in prof.candidates}
    var = {k: c.variance for k, c in cals.items()}
    this = prof.candidates[0]
    overall = _summ(this.atoms, var["this"])
    m = prof.m
    z = normal_z(alpha=SIM_ALPHA / m)  # two-sided: the 1 − 0.05/(2m) quantile
    sim = {
        "level": 1 - SIM_ALPHA,
        "bound": z * overall["worst_se"],
        "z": z,
        "method": (f"Bonferroni (union bound) over the {m:,} queries with the normal tail: "
                   f"z = {z:.3f} (the 1 − 0.05/(2m) quantile) times the worst standard error"),
    }
    if not cals["this"].pure:
        sigma = float(cals["this"].scale)
        sim["bound_subgaussian"] = math.sqrt(2 * math.log(2 * m / SIM_ALPHA)) * sigma * math.sqrt(
            this.atoms.qmax.max())
        sim["method_subgaussian"] = ("rigorous for the discrete Gaussian noise (σ-sub-Gaussian, Canonne, "
                                     "Kamath & Steinke 2020): sqrt(2 ln(2m/0.05)) σ times the worst sqrt(w X⁺ wᵀ)")
    else:
        sim["note"] = "Laplace noise: the normal tail is an approximation."
    comps = []
    for c in prof.candidates:
        s = _summ(c.atoms, var[c.key])
        comps.append({"key": c.key, "strategy": c.label, "rmse": s["rmse"], "worst_se": s["worst_se"],
                      "ratio_to_this": s["rmse"] / overall["rmse"] if overall["rmse"] > 0 else None})
    groups = []
    g_all = this.atoms.group
    for gi, name in enumerate(prof.groups):
        sel = g_all == gi
        if not sel.any():
            continue
        row: dict[str, Any] = {"group": name, "n_queries": int(round(this.atoms.count[sel].sum()))}
        for c in prof.candidates:
            a = c.atoms
            s = _summ(Atoms(a.size[sel], a.group[sel], a.count[sel], a.qsum[sel], a.qmax[sel], a.qmin[sel]),
                      var[c.key])
            row[f"rmse_{c.key}"] = s["rmse"]
            if c.key == "this":
                row["worst_se"] = s["worst_se"]
        groups.append(row)
    # per query size (cells); at most MAX_SIZE_POINTS sizes (log-spaced bins beyond that)
    sizes, inv = np.unique(this.atoms.size, return_inverse=True)
    if len(sizes) > MAX_SIZE_POINTS:
        edges = np.geomspace(sizes[0], sizes[-1] * (1 + 1e-9), MAX_SIZE_POINTS + 1)
        b = np.clip(np.searchsorted(edges, this.atoms.size, side="right") - 1, 0, MAX_SIZE_POINTS - 1)
        used, inv = np.unique(b, return_inverse=True)
        w_cnt = np.bincount(inv, weights=this.atoms.count)
        sizes = np.bincount(inv, weights=this.atoms.count * this.atoms.size) / w_cnt  # mean size per bin
    cnt = np.bincount(inv, weights=this.atoms.count)
    by_size: dict[str, Any] = {"cells": sizes.tolist(), "n_queries": cnt.tolist()}
    for c in prof.candidates:
        a = c.atoms
        rms = np.sqrt(var[c.key] * np.bincount(inv, weights=a.qsum) / cnt)
        by_size[f"rms_se_{c.key}"] = rms.tolist()
        if c.key == "this":
            mx = np.full(len(sizes), -np.inf)
            mn = np.full(len(sizes), np.inf)
            np.maximum.at(mx, inv, a.qmax)
            np.minimum.at(mn, inv, a.qmin)
            by_size["max_se_this"] = np.sqrt(var[c.key] * mx).tolist()
            by_size["min_se_this"] = np.sqrt(var[c.key] * mn).tolist()
    return {
        "m": m,
        "grouped_by": prof.grouped_by,
        "rmse": overall["rmse"],
        "worst_se": overall["worst_se"],
        "simultaneous_95": sim,
        "groups": groups,
        "comparisons": comps,
        "labels": {c.key: c.label for c in prof.candidates},
        "short_labels": {c.key: SHORT.get(c.key, c.key) if c.key != "direct" or not cals["direct"].pure
                         else "Laplace on W" for c in prof.candidates},
        "by_size": by_size,
        "skipped": list(prof.skipped),
    }


def se_vs_size_figure(rep: dict[str, Any], *, height: int = 360):
    """Plotly: standard error of a query against its size in cells (log–log), this strategy with
    its min–max band and the comparison strategies as lines."""
    import plotly.graph_objects as go

    bs = rep["by_size"]
    x = bs["cells"]
    fig = go.Figure()
    if len(x) > 1:
        fig.add_trace(go.Scatter(x=x + x[::-1], y=bs["max_se_this"] + bs["min_se_this"][::-1], fill="toself",
                                 fillcolor="rgba(31,78,121,0.15)", line={"width": 0}, hoverinfo="skip",
                                 name="this strategy: lowest to highest"))
    colours = {"this": "#1f4e79", "identity": "#b35806", "direct": "#7f7f7f", "hierarchical": "#1b7837",
               "haar": "#762a83"}
    for key, label in rep["labels"].items():
        fig.add_trace(go.Scatter(
            x=x, y=bs[f"rms_se_{key}"], mode="lines+markers" if len(x) < 40 else "lines", name=label,
            line={"color": colours.get(key, "#333333"), "width": 3 if key == "this" else 1.5,
                  "dash": "solid" if key == "this" else "dot"},
            hovertemplate="%{x:,} cells: SE %{y:,.1f}<extra>" + label + "</extra>",
        ))
    fig.update_layout(
        title={"text": "Standard error of a query against its size (before release, no data)",
               "font": {"size": 14}},
        xaxis={"title": "query size (cells)", "type": "log"},
        yaxis={"title": "standard error (people)", "type": "log"},
        height=height, margin={"l": 10, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig
