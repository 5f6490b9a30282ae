"""The matrix mechanism (Eigen-Design) on a geographic hierarchy: census counts tuned to queries.

The domain is the hierarchy's finest areas (``n`` leaves).  The *workload* is public:

* every area total at every level (``nation → state → county``), each level with an importance
  weight (ours: geography-hierarchy counts as hierarchy Grams;
  P15: a level weighted by ``w`` counts ``w²`` times in the total squared error), and
* optionally, the curator's own **area-code sets** (:class:`AreaSets`): each query is the total of
  a set of areas at any level (a metro area made of counties, a school district made of tracts).

The strategy is designed from the workload alone (never the data, so it costs no budget):

* ρ-zCDP: the flat Eigen-Design (§2.3) of the workload's Gram, with Program 1 stopped at a
  certified relative duality gap of :data:`GAP_TOL` (hierarchy Grams have large degenerate
  eigenspaces, on which the dual creeps for thousands of iterations after reaching 1e-4;
  the analytic errors are exact for the strategy used either way), cached on disk by workload.
* pure ε-DP: Eigen-queries are dense and bad under L1 sensitivity (§7.3), so the L1 strategy of
  :func:`dpcore.estimate.matrix_design.l1_strategy` is used, with the geographic tree itself (one row per
  area) offered as a design.

The release answers ``y = A x + z`` once with the whole budget, solves ``x̂ = A⁺ y`` for the
finest areas and sums ``x̂`` up the tree, so every level adds up exactly (consistent, real valued,
possibly negative).  Because every leaf is a workload query, ``A`` has full column rank and ``x̂``
is unbiased.  The error of every area is exact and data-free: ``Var = Var(z) · q X⁺ qᵀ`` for the
area's indicator ``q`` (§3.3), so the plan shows it before release.

Unit of privacy: one person (add/remove), so one finest-area count changes by 1 and the strategy
answers by one column of ``A``.  Replace-one neighbours are refused: the public exact total they
allow is not part of the matrix mechanism.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpcore.areas.hierarchy import Hierarchy
from dpcore.areas.tree_plans import HierarchyRelease, HierLevelPlan, HierPlan, expected_max
from dpcore.data.csv_safe import csv_bytes
from dpcore.errors import InputError, ParameterError
from dpcore.estimate import (
    matrix_cache,
    matrix_errors,
    matrix_l1,
    matrix_release,
    matrix_strategy,
    matrix_workload,
)
from dpcore.privacy import calibration
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import interval_half_width

#: Most finest areas (the dense Eigen-Design's limit).
MAX_LEAVES = matrix_workload.FULL_METHOD_MAX_N
#: Accepted relative duality gap of Program 1 for hierarchy workloads (see the module docstring).
GAP_TOL = 1e-4
#: Most area-code-set queries in one upload.
MAX_AREA_SETS = 5000
_QUERY_COLUMNS = ("query", "query_id", "name", "set", "group")
_AREA_COLUMNS = ("area", "code", "geoid", "area_code", "id")


# ---------------------------------------------------------------------------------------------
# The curator's area-code sets (public queries)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AreaSets:
    """Public queries, each the total of a set of areas (of any level) of a hierarchy.

    ``rows`` is the 0/1 matrix over the hierarchy's finest areas (a finest area is counted once
    even when the set lists it twice, directly or through a coarser area).  ``members`` keeps the
    listed areas (``level:label``) for the release record.
    """

    names: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    def to_record(self) -> list[dict[str, Any]]:
        return [{"query": n, "areas": list(m)} for n, m in zip(self.names, self.members, strict=True)]


def _pick(cols: dict[str, str], names: Sequence[str], what: str, have: Sequence[str]) -> str:
    for n in names:
        if n in cols:
            return cols[n]
    raise InputError(
        f"The query file has no {what} column (looked for {', '.join(names)}; it has "
        f"{', '.join(have) or 'no columns'}). Give one row per (query, area), e.g. 'query,area' "
        "then 'Metro A,44007'."
    )


def read_area_sets(data: bytes | str | pd.DataFrame, h: Hierarchy, filename: str = "") -> AreaSets:
    """Parse a CSV of area-code sets: one row per (query, area), optional ``level`` column.

    ``area`` is an area's label as in the exports (``44007`` for unique codes, ``44/007`` for
    codes unique within their parent) or its joined code (a GEOID such as ``44007``).  Without
    a ``level`` column the code is looked up at every level; a code found at two levels is an
    error that asks for the column.  ``filename`` is only used in messages.
    """
    if isinstance(data, pd.DataFrame):
        df = data.copy()
    else:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if not raw.strip():
            raise InputError(f"The query file {filename or ''} is empty. Give one row per (query, area).".replace("  ", " "))
        from dpcore.data.text import SNIFF_BYTES, check_text_head, gunzip_limited

        label = f"'{filename}'" if filename else "the query file"
        if raw[:2] == b"\x1f\x8b":
            raw = gunzip_limited(raw, label)  # damaged gzip and gzip bombs: InputError
        check_text_head(raw[: SNIFF_BYTES], label, whole=len(raw) <= SNIFF_BYTES)
        try:
            df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
        except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ValueError) as e:
            raise InputError(
                f"Could not read the query file {filename}: {str(e).splitlines()[0] if str(e) else type(e).__name__}. "
                "Save it as a UTF-8 CSV with a header row 'query,area'."
            ) from None
    have = [str(c) if len(str(c)) <= 40 else str(c)[:37] + "..." for c in df.columns][:20]
    cols = {str(c).strip().lower(): str(c) for c in df.columns}
    qcol = _pick(cols, _QUERY_COLUMNS, "query name", have)
    acol = _pick(cols, _AREA_COLUMNS, "area code", have)
    lcol = cols.get("level")
    if df.empty:
        raise InputError("The query file has a header but no rows. Add one row per (query, area).")
    q = df[qcol].astype(str).str.strip()
    a = df[acol].astype(str).str.strip()
    bad = np.flatnonzero((q == "").to_numpy() | (a == "").to_numpy())
    if bad.size:
        raise InputError(f"Rows {_row_list(bad)} of the query file have an empty query name or area code; fill or "
                         "delete them.")
    level_of = {name.lower(): d for d, name in enumerate(h.level_names)}
    depth_rows: np.ndarray | None = None
    if lcol is not None:
        lv = df[lcol].astype(str).str.strip().str.lower()
        unknown = sorted(set(lv) - set(level_of))
        if unknown:
            raise InputError(
                f"Unknown level {', '.join(repr(u) for u in unknown[:5])} in the query file; the levels are "
                f"{', '.join(h.level_names[1:])}."
            )
        depth_rows = lv.map(level_of).to_numpy(dtype=np.int64)
    # area label -> (depth, index), per depth, from the export labels and the joined codes
    lookup: list[dict[str, int]] = [{}]
    for d in range(1, h.depth + 1):
        m = {str(s): i for i, s in enumerate(h.joined_codes(d))}
        m.update({str(s): i for i, s in enumerate(h.labels(d))})
        lookup.append(m)
    hits = np.full(len(df), -1, dtype=np.int64)
    depth = np.full(len(df), -1, dtype=np.int64)
    ambiguous: list[int] = []
    for r, code in enumerate(a.to_numpy()):
        depths = [int(depth_rows[r])] if depth_rows is not None else range(1, h.depth + 1)
        found = [(d, lookup[d][code]) for d in depths if d >= 1 and code in lookup[d]]
        if len(found) > 1:
            ambiguous.append(r)
        elif found:
            depth[r], hits[r] = found[0]
    if ambiguous:
        raise InputError(
            f"Rows {_row_list(np.array(ambiguous))} of the query file name codes found at more than one level "
            f"(e.g. '{a.iloc[ambiguous[0]]}'). Add a 'level' column ({', '.join(h.level_names[1:])})."
        )
    missing = np.flatnonzero(hits < 0)
    if missing.size:
        example = h.labels(h.depth)[0]
        raise InputError(
            f"Rows {_row_list(missing)} of the query file name areas that are not in the hierarchy "
            f"(e.g. '{a.iloc[int(missing[0])]}'). Use the area codes of the exports, e.g. '{example}'."
        )
    names = list(dict.fromkeys(q.to_numpy()))
    if len(names) > MAX_AREA_SETS:
        raise InputError(f"The query file defines {len(names):,} queries; at most {MAX_AREA_SETS:,} are supported. "
                         "Split it, or keep the queries that matter most.")
    qi = pd.Series(range(len(names)), index=names)[q.to_numpy()].to_numpy()
    rows = np.zeros((len(names), h.n_leaves))
    members: list[list[str]] = [[] for _ in names]
    for r in range(len(df)):
        d, i = int(depth[r]), int(hits[r])
        rows[qi[r], h.descendants(d, i, h.depth)] = 1.0
        members[qi[r]].append(f"{h.level_names[d]}:{h.labels(d)[i]}")
    rows.setflags(write=False)
    return AreaSets(tuple(str(n) for n in names), tuple(tuple(m) for m in members), rows)


def _row_list(idx: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(i) + 2) for i in idx[:limit])  # +2: 1-based, after the header line
    return shown + (f" and {idx.size - limit:,} more" if idx.size > limit else "")


# ---------------------------------------------------------------------------------------------
# Workload and strategy (public inputs only)
# ---------------------------------------------------------------------------------------------


def ancestors(h: Hierarchy) -> list[np.ndarray]:
    """``anc[d][j]``: the index at depth ``d`` of finest area ``j``'s ancestor."""
    anc = [np.arange(h.n_leaves, dtype=np.int64)]
    for d in range(h.depth - 1, -1, -1):
        anc.insert(0, h.parents[d][anc[0]])
    return anc


#: How the levels' queries are weighed (ours: a template plus weights; a level of weight w counts w² in the design).
IMPORTANCE = {
    "levels": "every level equally (its areas share the level's weight)",
    "queries": "every area total equally (the finest level dominates)",
    "custom": "custom weight per level",
}


def level_weights(h: Hierarchy, importance: str = "levels", weights: Sequence[float] | None = None) -> np.ndarray:
    """Row weight ``w_d`` of each level's area totals (a query weighted ``w`` counts ``w²`` times).

    * ``levels``: every level matters as much as every other: ``w_d² = 1/n_d``, so each level's
      total squared error weighs the same whatever its number of areas (the census default:
      without it the finest level, with most of the queries, takes almost all of the accuracy).
    * ``queries``: every area total weighs 1 (the paper's unweighted workload).
    * ``custom``: ``weights`` (one per level, top first) are the levels' relative importances,
      shared by their areas: ``w_d² = weights_d / n_d``.

    ``uniform`` (the other mechanisms' default split) means ``levels``.  Weights are normalised so
    the largest is 1; they change the strategy, not the privacy.
    """
    w2 = _raw_level_w2(h, importance, weights)
    return np.sqrt(w2 / w2.max())


def _raw_level_w2(h: Hierarchy, importance: str, weights: Sequence[float] | None) -> np.ndarray:
    sizes = np.asarray(h.sizes, dtype=float)
    if importance == "uniform":  # the other mechanisms' default split: read as "levels"
        importance = "levels"
    if importance == "queries":
        return np.ones_like(sizes)
    if importance == "levels":
        return 1.0 / sizes
    if importance == "custom":  # importances with mean 1, shared by the level's areas
        imp = np.asarray(calibration.split(1.0, h.depth + 1, "custom", weights=weights), dtype=float) * sizes.size
        return imp / sizes
    raise ParameterError(f"Unknown level importance {importance!r}; use {', '.join(IMPORTANCE)}.")


def sets_row_weight(h: Hierarchy, importance: str, weights: Sequence[float] | None, n_sets: int,
                    sets_importance: float) -> float:
    """Row weight of each area-code-set query, on the scale of :func:`level_weights`.

    With ``levels``/``custom`` importance, ``sets_importance`` is how much the curator's queries
    matter *together*, in units of one (average) level: 1 = as much as one level, shared by the
    queries.  With ``queries``, each query counts like one area total times ``sets_importance``.
    """
    si = float(sets_importance)
    if not (math.isfinite(si) and si > 0):
        raise ParameterError("The weight of the area-code sets must be a positive number.")
    raw = _raw_level_w2(h, importance, weights)
    imp = "levels" if importance == "uniform" else importance
    w2 = si if imp == "queries" else si / max(int(n_sets), 1)
    return math.sqrt(w2 / raw.max())


def check_size(h: Hierarchy) -> None:
    """Refuse a hierarchy with more finest areas than the dense Eigen-Design handles."""
    if h.n_leaves > MAX_LEAVES:
        raise ParameterError(
            f"The matrix mechanism handles at most {MAX_LEAVES:,} finest areas; this hierarchy has "
            f"{h.n_leaves:,} {h.level_names[-1]} areas. Choose TopDown or the exact tree DP for it, or "
            "release a coarser level (leave the finest level column out)."
        )


def workload(h: Hierarchy, weights: Sequence[float], area_sets: AreaSets | None = None,
             sets_weight: float = 1.0) -> matrix_workload.Workload:
    """Every area of every level (row weight ``weights[d]``) plus the area-code sets."""
    check_size(h)
    w = np.asarray(weights, dtype=float)
    if w.shape != (h.depth + 1,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ParameterError(f"Give one positive weight per level ({h.depth + 1}).")
    anc = ancestors(h)
    n = h.n_leaves
    blocks = []
    G = np.zeros((n, n))
    for d in range(h.depth + 1):
        B = np.zeros((h.sizes[d], n))
        B[anc[d], np.arange(n)] = w[d]
        blocks.append(B)
        G += (w[d] * w[d]) * (anc[d][:, None] == anc[d][None, :])
    spec: dict[str, Any] = {"family": "hierarchy", "levels": list(h.level_names), "weights": w.tolist(),
                            "sizes": list(h.sizes)}
    if area_sets is not None and len(area_sets):
        sw = float(sets_weight)
        if not (math.isfinite(sw) and sw > 0):
            raise ParameterError("The weight of the area-code sets must be a positive number.")
        R = sw * area_sets.rows
        blocks.append(R)
        G += R.T @ R
        spec.update(area_sets=len(area_sets), sets_weight=sw)
    W = np.vstack(blocks)
    W.setflags(write=False)
    G.setflags(write=False)
    return matrix_workload.Workload("geography hierarchy" + (" + area-code sets" if "area_sets" in spec else ""),
                       (n,), W.shape[0], spec, W=W, G=G)


def tree_design(h: Hierarchy) -> matrix_strategy.Strategy:
    """The geographic tree as an L1 design: one 0/1 row per area of every level (``Δ1 = L + 1``)."""
    anc = ancestors(h)
    n = h.n_leaves
    A = np.zeros((h.n_nodes, n))
    off = 0
    for d in range(h.depth + 1):
        A[off + anc[d], np.arange(n)] = 1.0
        off += h.sizes[d]
    return matrix_strategy.Strategy("geo-tree", n, A=A, norm="l1")


# Public, data-free results memoised per (workload hash, definition): a page rerun must not
# redo the design, the SVD bound or the per-area variances (seconds at a few thousand areas).
_MEMO = matrix_cache.DesignMemo(4)


def _design(h: Hierarchy, w: matrix_workload.Workload, definition: str) -> dict[str, Any]:
    return _MEMO.get((w.content_hash(), definition), lambda: _make_design(h, w, definition))


def _make_design(h: Hierarchy, w: matrix_workload.Workload, definition: str) -> dict[str, Any]:
    if definition == "pure":
        # The geographic tree (every area measured) reweighted by the §7.3 L1 program: the
        # natural L1 design for area totals.  l1_strategy's generic candidates (identity, binary
        # tree, Haar over the leaf order) are far worse on hierarchy workloads and cost ~30× the
        # time (39 s against 1.4 s on the 576-zone demo), so they are not tried here.
        s = matrix_l1.l1_reweight(w, tree_design(h))
    else:
        s = matrix_cache.cached_strategy(w, "eigen", gap_tol=GAP_TOL)
    svdb = None
    if definition != "pure":
        sig = s.info.get("sigma") if s.kind == "eigen" else None
        # the design already eigendecomposed G (same rank cut as svd_bound): no second eigh
        svdb = float(np.sqrt(np.asarray(sig)).sum() ** 2 / w.n) if sig is not None else matrix_errors.svd_bound(w)
    return {"strategy": s, "node_vpp": node_variances_per_p(h, s), "tse_per_p": matrix_errors.tse_per_p(w, s), "svdb": svdb}


def strategy(h: Hierarchy, w: matrix_workload.Workload, definition: str) -> matrix_strategy.Strategy:
    """The strategy for ``w``: Eigen-Design under zCDP (cached on disk by workload), the best L1
    strategy (the geographic tree among the designs) under pure ε.  Memoised in memory."""
    return _design(h, w, definition)["strategy"]


def strategy_label(s: matrix_strategy.Strategy) -> str:
    names = {"eigen": "Eigen-Design", "identity": "identity (noisy finest areas)", "hierarchical": "binary tree",
             "haar": "Haar wavelet", "geo-tree": "geographic tree (every area)"}
    kind = s.kind
    weighted = kind.startswith("weighted-")
    base = names.get(kind.removeprefix("weighted-"), kind)
    return f"L1-reweighted {base}" if weighted else base


def _calibration(s: matrix_strategy.Strategy, cost: PrivacyCost) -> matrix_release.Calibration:
    if cost.definition == "pure":
        return matrix_release.calibrate(s, epsilon=cost.value)
    return matrix_release.calibrate(s, rho=cost.value)


def node_variances_per_p(h: Hierarchy, s: matrix_strategy.Strategy) -> list[np.ndarray]:
    """``q X⁺ qᵀ`` for every area's indicator ``q``, per depth (multiply by ``Var(z)``)."""
    anc = ancestors(h)
    n = h.n_leaves
    out = []
    for d in range(h.depth + 1):
        B = np.zeros((h.sizes[d], n))
        B[anc[d], np.arange(n)] = 1.0
        out.append((s.whiten(B) ** 2).sum(axis=0))
    return out


# ---------------------------------------------------------------------------------------------
# Plan (data-free) and release
# ---------------------------------------------------------------------------------------------


def plan(h: Hierarchy, cost: PrivacyCost, *, neighbour: str = "add_remove", split: str = "levels",
         weights: Sequence[float] | None = None, statistic: str = "count",
         area_sets: AreaSets | None = None, sets_weight: float = 1.0) -> HierPlan:
    """The :class:`~dpcore.areas.tree_plans.HierPlan` of a matrix-mechanism release (data-free).

    ``split`` (``levels``, ``queries`` or ``custom``) and ``weights`` set the levels' importance
    (:func:`level_weights`), not a budget split: the whole budget answers the strategy once.  Every level's SD is exact
    (``Var(z)·q X⁺ qᵀ`` per area); the mean and typical maximum absolute errors use the normal
    shape (each estimate sums many strategy noises).
    """
    if statistic != "count":
        raise ParameterError("The matrix mechanism releases plain counts; for group sizes choose 'exact' or "
                             "'dpc_approx'.")
    if neighbour != "add_remove":
        raise ParameterError("The matrix mechanism protects one person added or removed; choose the add/remove "
                             "neighbours (its total is noised, not published exactly).")
    wts = level_weights(h, split, weights)
    row_w = sets_row_weight(h, split, weights, len(area_sets), sets_weight) if area_sets is not None else 1.0
    w = workload(h, wts, area_sets, row_w)
    des = _design(h, w, cost.definition)
    s = des["strategy"]
    cal = _calibration(s, cost)
    var = float(cal.variance)
    node_var = [var * v for v in des["node_vpp"]]
    per_unit = math.sqrt(var) / s.sensitivity()  # sqrt(P)/Δ: TSE/P → the answers' variance
    t = des["tse_per_p"]
    extra: dict[str, Any] = {
        "workload": w.name, "n_queries": int(w.m), "level_weights": wts.tolist(),
        "strategy": strategy_label(s), "strategy_kind": s.kind, "strategy_queries": int(s.p),
        "noise": cal.distribution, "noise_scale": float(cal.scale), "noise_variance": var,
        "sensitivity": float(s.sensitivity()),
        "expected_rmse_per_query": math.sqrt(t / w.m) * per_unit,
        "program1_gap": s.info.get("gap"),
        "sets_weight": float(sets_weight) if area_sets is not None else None,
        "sets_row_weight": row_w if area_sets is not None else None,
        "notes": [],
    }
    if cost.definition == "pure":
        extra["notes"].append(
            f"Pure ε-DP: the {strategy_label(s)} strategy is used (every area measured, with weights "
            "chosen for your queries under L1 sensitivity), because Eigen-Design strategies have a large "
            "L1 sensitivity (Li & Miklau 2012, Sec. 3.5). Choose ρ-zCDP for the Eigen-Design tuned to your queries.")
        extra["rmse_lower_bound"] = None
        extra["ratio_to_lower_bound"] = None
    else:
        b = des["svdb"]
        if t < b * (1 - 1e-9):
            raise ParameterError(f"Computed error {t:.6g} is below the SVD bound {b:.6g}: numerical failure.")
        extra["rmse_lower_bound"] = math.sqrt(b / w.m) * per_unit
        extra["ratio_to_lower_bound"] = math.sqrt(t / b)
    if area_sets is not None and len(area_sets):
        sd = np.sqrt(var * (s.whiten(area_sets.rows) ** 2).sum(axis=0))
        extra["area_sets"] = {"query": list(area_sets.names), "sd": sd.tolist(),
                              "definition": area_sets.to_record()}
    levels = []
    for d in range(h.depth + 1):
        sd_nodes = np.sqrt(node_var[d])
        levels.append(HierLevelPlan(
            depth=d, level=h.level_names[d], areas=h.sizes[d], cells=h.sizes[d], measured=True,
            share=float(cost.value), noise=cal.distribution, scale=float(cal.scale),
            l1_sensitivity=float(s.l1_sensitivity), l2_sensitivity=float(s.l2_sensitivity),
            noise_sd=math.sqrt(var), sd=float(math.sqrt(np.mean(node_var[d]))),
            mean_abs=float(np.mean(sd_nodes)) * math.sqrt(2.0 / math.pi),
            max_abs=expected_max(sd_nodes, "normal"),
            basis="matrix mechanism: exact SD per area, Var(z)·q X⁺ qᵀ; mean and maximum with the normal shape",
        ))
    return HierPlan("matrix", cost, neighbour, "count", 1, split,
                       tuple(float(x) for x in (weights or ())), tuple(levels),
                       tuple(np.sqrt(v) for v in node_var), tuple(cal.scale for _ in levels), extra=extra)


def check_data(counts: Any, p: HierPlan, *, area_sets: AreaSets | None = None) -> None:
    """The refusals of :func:`release` that depend on ``counts``, run before the budget is charged.

    The strategy answers of the true finest counts must fit the noise grid
    (:func:`dpcore.estimate.matrix_release.check_data`; Li, Hay, Miklau, Rastogi & McGregor 2015,
    §3, with the exact answers of issue 18, item 3c).  A refusal publishes nothing and is seen by
    the curator only: it says the counts exceed about 2^62 grid units, far beyond any real table.
    """
    if (area_sets is not None) != (p.extra.get("sets_row_weight") is not None):
        raise ParameterError("Release with the same area-code sets as the plan.")
    h = counts.hierarchy
    w = workload(h, p.extra["level_weights"], area_sets, p.extra.get("sets_row_weight") or 1.0)
    s = strategy(h, w, p.cost.definition)
    kw = {"epsilon": p.cost.value} if p.cost.definition == "pure" else {"rho": p.cost.value}
    matrix_release.check_data(w, s, counts.levels()[h.depth], **kw)


def release(counts: Any, p: HierPlan, noise: Any, *, area_sets: AreaSets | None = None,
            sets_weight: float = 1.0) -> HierarchyRelease:
    """Release ``counts`` (:class:`~dpcore.areas.hierarchy.HierarchyCounts`) as planned by :func:`plan`.

    The caller has charged the ledger with ``p.cost``.  The noise is drawn by
    :func:`dpcore.estimate.matrix_release.release` (exact discrete samplers of :mod:`dpcore.privacy.noise`).
    """
    h = counts.hierarchy
    if (area_sets is not None) != (p.extra.get("sets_row_weight") is not None):
        raise ParameterError("Release with the same area-code sets as the plan.")
    w = workload(h, p.extra["level_weights"], area_sets, p.extra.get("sets_row_weight") or 1.0)
    s = strategy(h, w, p.cost.definition)
    x = counts.levels()[h.depth]
    kw = {"epsilon": p.cost.value} if p.cost.definition == "pure" else {"rho": p.cost.value}
    res = matrix_release.release(w, s, x, noise, **kw)
    if res.cost.definition != p.cost.definition or res.cost.value > p.cost.value * (1 + 1e-9):
        raise ParameterError(f"Internal error: the release would cost {res.cost.label()}, more than the "
                             f"{p.cost.label()} charged.")  # pragma: no cover - calibrate() rounds down
    values = h.aggregate(np.asarray(res.x_hat, dtype=float))
    details: dict[str, Any] = {
        "matrix": {k: v for k, v in p.extra.items() if k != "area_sets"},
        "guarantee": res.guarantee,
    }
    if area_sets is not None and len(area_sets):
        details["area_sets"] = {
            "query": list(area_sets.names),
            "answer": (area_sets.rows @ res.x_hat).tolist(),
            "standard_error": list(p.extra["area_sets"]["sd"]),
            "definition": area_sets.to_record(),
        }
    return HierarchyRelease(h, p, tuple(values), None, (), details)


def area_sets_csv(rel: Any) -> bytes:
    """``area_queries.csv``: each area-code set's noisy total, its SD and 95 % interval."""
    a = rel.details.get("area_sets")
    if not a:
        raise ParameterError("This release has no area-code-set queries.")
    ans = np.asarray(a["answer"], float)
    se = np.asarray(a["standard_error"], float)
    half = interval_half_width("normal", se)  # a set's total sums many areas' estimates
    df = pd.DataFrame({
        "query": a["query"], "areas": [";".join(d["areas"]) for d in a["definition"]],
        "noisy_total": ans, "standard_error": se,
        "ci95_low": ans - half, "ci95_high": ans + half,
    })
    return csv_bytes(df, lambda d: d.to_csv(index=False, float_format="%.6g").encode())
