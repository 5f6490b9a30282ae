"""TDA_ℓ∞: the InfTDA walk with its L∞ projection solved by a black-box MILP (a baseline).

Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (``TDA_ℓ∞``): the same walk and the same objective
as InfTDA, solved per node by a generic mixed-integer solver (scipy's HiGHS), which returns an
arbitrary optimal vertex instead of IntOpt's sparse one.  It shows why IntOpt's choice among
optimal answers matters (more spurious flows), and it is far slower: for comparisons on small
data only.

Parameters
    As InfTDA (:mod:`.base`); the zeroing order does not apply.

Privacy
    As InfTDA (:func:`.common.sensitivity`); the solver is post-processing.

Plan
    As InfTDA, with the guaranteed L∞ bound (the projection is an exact L∞ one).  One solver call
    per possible parent pair of a measured level: a plan that could need more than
    :data:`MILP_MAX_SUBPROBLEMS` at one level is refused from public inputs.

Release
    Per surviving node, ``min α  s.t.  y_i − α ≤ x_i,  y_i + α ≥ x_i,  Σ y = c,  y ∈ ℕ, α ≥ 0``
    (ours), solved by :func:`scipy.optimize.milp`.
"""

from __future__ import annotations

import numpy as np

from dpcore.errors import ParameterError
from dpcore.flows.mechanisms.base import ORDER, ORIENTATION, SPLIT, TIEBREAK, WEIGHTS, ODMechanism
from dpcore.flows.mechanisms.common import ODPlan, ODTree

__all__ = ["MILP_MAX_SUBPROBLEMS", "TopDownLinfMILP", "linf_milp_segments"]

#: Most MILP calls per tree level the black-box TDA_ℓ∞ baseline will make.
MILP_MAX_SUBPROBLEMS = 20_000


class TopDownLinfMILP(ODMechanism):
    """The InfTDA walk with a black-box MILP per node (Boninsegna & Silvestri 2025, Sec. 5)."""

    name = "tda_linf_milp"
    title = "TopDown L∞ with a generic MILP solver (baseline)"
    summary = ("The InfTDA walk with the same objective solved per area pair by a black-box MILP "
               "(HiGHS), which returns an arbitrary optimal answer rather than the sparse one.")
    when_to_use = ("Comparisons on small data: it shows why IntOpt's choice among optimal answers matters "
                   "(more spurious flows), and it is far slower.")
    reference = "Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (TDA_ℓ∞)"
    params = (ORIENTATION, SPLIT, WEIGHTS, ORDER, TIEBREAK)
    definitions = ("pure", "zcdp")
    consistent = nonnegative = True
    exact_linf = True

    def check_size(self, tree: ODTree, measured: list[bool]) -> None:
        """Data-free: one solver call per (possible) parent pair of a measured level."""
        worst = max((tree.pairs[t - 1] for t in range(1, tree.depth + 1) if measured[t]), default=0)
        if worst > MILP_MAX_SUBPROBLEMS:
            raise ParameterError(
                f"The MILP baseline could need {worst:,} solver calls at one level (limit {MILP_MAX_SUBPROBLEMS:,}). "
                "Use InfTDA, which solves the same problem exactly in closed form, or a smaller hierarchy."
            )

    def project(self, x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, p: ODPlan, t: int,
                tiebreak: np.ndarray | None) -> np.ndarray:
        """The L∞ projection by the MILP solver, one call per parent (ties: the solver's)."""
        return linf_milp_segments(x, offsets, totals, p.levels[t].name)


def linf_milp_segments(x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, level: str) -> np.ndarray:
    """The per-node L∞ projection by scipy's MILP (HiGHS), one call per segment (baseline only).

    ``min α  s.t.  y_i − α ≤ x_i,  y_i + α ≥ x_i,  Σ y = c,  y ∈ ℕ, α ≥ 0`` (ours).  The
    solver returns whichever optimal vertex it finds first — the point of the baseline.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    m = totals.size
    if m > MILP_MAX_SUBPROBLEMS:
        raise ParameterError(
            f"The MILP baseline would make {m:,} solver calls at level '{level}' (limit "
            f"{MILP_MAX_SUBPROBLEMS:,}). Use InfTDA, which solves the same problem exactly in closed form."
        )
    y = np.empty(x.size, dtype=np.int64)
    for i in range(m):
        a, b_ = int(offsets[i]), int(offsets[i + 1])
        xi = x[a:b_].astype(float)
        b = xi.size
        c = int(totals[i])
        if b == 1 or c == 0:
            y[a:b_] = c if b == 1 else 0
            continue
        eye = np.eye(b)
        A = np.block([[eye, -np.ones((b, 1))], [eye, np.ones((b, 1))], [np.ones((1, b)), np.zeros((1, 1))]])
        lo = np.concatenate([np.full(b, -np.inf), xi, [c]])
        hi = np.concatenate([xi, np.full(b, np.inf), [c]])
        cost = np.zeros(b + 1)
        cost[-1] = 1.0
        res = milp(cost, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(b + 1),
                   bounds=Bounds(np.zeros(b + 1), np.full(b + 1, np.inf)))
        if not res.success:  # pragma: no cover - the problem is always feasible (y = c·e_1)
            raise ParameterError(f"The MILP solver failed at level '{level}': {res.message}")
        yi = np.round(res.x[:b]).astype(np.int64)
        # the solver works in floating point: restore the exact sum on the largest entry
        yi[np.argmax(yi)] += c - int(yi.sum())
        y[a:b_] = yi
    return y
