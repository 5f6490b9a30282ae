"""The matrix mechanism (Eigen-Design) on a geographic hierarchy: census counts tuned to queries.

The domain is the hierarchy's finest areas (``n`` leaves).  The *workload* is public:

* every area total at every level (``nation → state → county``), each level with an importance
  weight (ours: geography-hierarchy counts as hierarchy Grams;
  P15: a level weighted by ``w`` counts ``w²`` times in the total squared error), and
* optionally, the curator's own **area-code sets** (:class:`~dpcore.areas.area_sets.AreaSets`): each query is the total of
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

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpcore.areas.area_sets import AreaSets
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms.tree import WEIGHTS, TreeMechanism
from dpcore.areas.tree_plans import (
    HierarchyRelease,
    HierLevelPlan,
    HierPlan,
    LevelNoise,
    expected_max,
)
from dpcore.core.mechanism import Param, Plan
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
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
from dpcore.privacy.noise import NoiseSource

#: Most finest areas (the dense Eigen-Design's limit).
MAX_LEAVES = matrix_workload.FULL_METHOD_MAX_N
#: Accepted relative duality gap of Program 1 for hierarchy workloads (see the module docstring).
GAP_TOL = 1e-4


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


# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------


class MatrixMechanism(TreeMechanism):
    """One noisy answer to a strategy designed for the area totals (and area-code sets)."""

    name = "matrix"
    title = "Matrix mechanism (Eigen-Design, tuned to the area totals you ask for)"
    summary = ("One noisy answer to a strategy designed for every area total of every level (and any "
               "area-code sets you upload); the finest areas are its least-squares solution and every "
               "level is their sum. Counts are real numbers and may be negative; every area's error is exact.")
    when_to_use = ("When people will ask for totals of several levels or of your own groups of areas "
                   "(metro areas, districts), under ρ-zCDP, on up to 4,096 finest areas.")
    reference = "Li & Miklau, PVLDB 5(6) 2012, Sec. 3.3"
    params = (
        Param("split", "Importance of the levels", str, "uniform",
              "How the levels' area totals are weighed: 'levels' (every level equally; 'uniform' reads as "
              "this), 'queries' (every area total equally) or 'custom' (weights).",
              choices=("uniform", "levels", "queries", "custom")),
        WEIGHTS,
        Param("sets_weight", "Weight of the area sets", float, 1.0,
              "Importance of your area-code sets against the levels' totals.", minimum=0.0),
    )
    consistent, integral, nonnegative = True, False, False
    counts, group_sizes = True, False
    default_definition = "zcdp"
    whole_budget = True
    release_options = ("area_sets", "sets_weight")

    def node_variances(self, h: Hierarchy, ln: LevelNoise, *, statistic: str, neighbour: str,
                       k: int) -> tuple[list[np.ndarray], str]:  # pragma: no cover - plan_tree is its own
        raise NotImplementedError("The matrix mechanism's variances come from its strategy (plan_tree).")

    def _plan_options(self, params: Mapping[str, Any], public: Mapping[str, Any]) -> dict[str, Any]:
        return {"area_sets": public.get("area_sets"), "sets_weight": params["sets_weight"]}

    def _plan_details(self, inner: HierPlan, public: Mapping[str, Any]) -> dict[str, Any]:
        # one strategy answered with the whole budget; levels are not split
        return {"neighbour": inner.neighbour, "split": inner.split, "split_weights": list(inner.split_weights),
                "statistic": inner.statistic, "strategy": inner.extra["strategy"],
                "level_weights": inner.extra["level_weights"], "area_sets": len(public.get("area_sets") or ())}

    def _release_options(self, plan: Plan) -> dict[str, Any]:
        return {"area_sets": plan.public.get("area_sets"), "sets_weight": plan.params["sets_weight"]}

    def plan_tree(self, h: Hierarchy, cost: PrivacyCost, *, neighbour: str = "add_remove", split: str = "levels",
                  weights: Sequence[float] | None = None, statistic: str = "count", k: int = 1,
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
                           tuple(np.sqrt(v) for v in node_var), tuple(cal.scale for _ in levels), extra=extra,
                       made_by=self)


    def check_counts(self, counts: HierarchyCounts, p: HierPlan, public: Mapping[str, Any]) -> None:
        """The refusals of :meth:`release_tree` that depend on ``counts``, run before the budget is charged.

        The strategy answers of the true finest counts must fit the noise grid
        (:func:`dpcore.estimate.matrix_release.check_data`; Li, Hay, Miklau, Rastogi & McGregor 2015,
        §3, with the exact answers of issue 18, item 3c).  A refusal publishes nothing and is seen by
        the curator only: it says the counts exceed about 2^62 grid units, far beyond any real table.
        """
        area_sets = public.get("area_sets")
        if (area_sets is not None) != (p.extra.get("sets_row_weight") is not None):
            raise ParameterError("Release with the same area-code sets as the plan.")
        h = counts.hierarchy
        w = workload(h, p.extra["level_weights"], area_sets, p.extra.get("sets_row_weight") or 1.0)
        s = strategy(h, w, p.cost.definition)
        kw = {"epsilon": p.cost.value} if p.cost.definition == "pure" else {"rho": p.cost.value}
        matrix_release.check_data(w, s, counts.levels()[h.depth], **kw)


    def release_tree(self, counts: HierarchyCounts, p: HierPlan, noise: NoiseSource, *,
                     area_sets: AreaSets | None = None, sets_weight: float = 1.0) -> HierarchyRelease:
        """Release ``counts`` as planned by :meth:`plan_tree`.

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
