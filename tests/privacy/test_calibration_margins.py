"""Calibration margins of real-valued noise on a grid (issue 18, item 3).

Each mechanism that rounds a real value to a grid before adding discrete noise must pay, in its
scale, for every grid step the rounding (and the float error before it) can add across all the
values one unit of privacy changes.  These tests try the worst cases.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from dpcore.points.mechanisms.htf import HTF, budget_breakdown
from dpcore.points.mechanisms.htf_tree import (
    GRANULARITY,
    grow_tree,
    objective_scale,
    rounding_steps,
)
from dpcore.privacy.noise import NoiseSource

G = GRANULARITY


def _grid_round(x: float) -> int:
    return int(np.rint(float(x) / float(G)))


def _float_objective(cells: list[int], cut: int) -> float:
    """The release's float path: ``o = 2·(P1/A1 + P2/A2)``, P exact integers."""
    total = 0.0
    for part in (cells[:cut], cells[cut:]):
        A, S = len(part), sum(part)
        P = sum(A * c - S for c in part if A * c > S)
        total += P / A
    return 2.0 * total


class TestHTFSplitMargin:
    """One person with ``k`` records can move up to ``min(k, nodes)`` nodes of a level."""

    def test_brute_force_small_nodes(self) -> None:
        # every 1 x L node with counts 0..2, a person adding k_j points to each of two nodes
        worst = {1: 0, 2: 0}
        nodes = [list(c) for L in range(2, 6) for c in itertools.product(range(3), repeat=L)]
        for cells in nodes:
            L = len(cells)
            for kj in (1, 2):
                for where in itertools.combinations_with_replacement(range(L), kj):
                    other = list(cells)
                    for w in where:
                        other[w] += 1
                    for cut in range(1, L):
                        steps = abs(_grid_round(_float_objective(other, cut))
                                    - _grid_round(_float_objective(cells, cut)))
                        worst[kj] = max(worst[kj], steps)
        # per node at most 2·k_j/g steps: with two nodes hit by k = 2 the total stays within
        # 2k/g + rounding_steps(k, nodes), the margin the scale pays
        for k in (1, 2):
            total = worst[1] * k if k == 2 else worst[1]
            assert total <= 2 * k / G + rounding_steps(k, 2)

    @pytest.mark.parametrize("k,nodes", [(2, 2), (3, 5), (5, 3), (9, 100), (16, 16)])
    def test_adversarial_float_error(self, k: int, nodes: int) -> None:
        # The module's error model: exact Δ_j < 2k_j (Theorem 1), float error |e| < 2^-14.
        # Place each touched node's objective just below a rounding boundary and let the float
        # error push the neighbour's value just across: each node gains one grid step.
        m = min(k, nodes)
        share = [k // m + (1 if j < k % m else 0) for j in range(m)]
        e = Fraction(1, 2**14) - Fraction(1, 2**40)
        total_steps = 0
        for kj in share:
            delta = 2 * kj - Fraction(1, 2**30)  # a large node: Δ_j just below 2k_j
            before = G / 2 - Fraction(1, 2**20) - e  # rounds down, error pushes it further down
            after = before + delta + 2 * e
            total_steps += _grid_round(after) - _grid_round(before)
            assert _grid_round(after) - _grid_round(before) == 2 * kj / G + 1
        evaluations, eps_level = 7, Fraction(1, 1000)
        t = objective_scale(k, evaluations, float(eps_level), nodes)
        # loss of one evaluation summed over the level's nodes (one draw each, scale t/g steps)
        loss = Fraction(total_steps) * G / t
        assert loss <= Fraction(eps_level) / evaluations * (1 + Fraction(1, 10**12))

    def test_grow_tree_pays_for_the_kept_nodes(self) -> None:
        class Recording(NoiseSource):
            def __init__(self) -> None:
                super().__init__(7)
                self.scales: list[Fraction] = []

            def laplace_on_grid(self, values, scale, granularity_exp):  # type: ignore[override]
                self.scales.append(Fraction(scale))
                return super().laplace_on_grid(values, scale, granularity_exp)

        counts = np.full((16, 16), 1000, dtype=np.int64)
        k = 4
        p = HTF().resolve_params({"height": 3, "T": 1, "theta": 0, "kappa": 1})
        b = budget_breakdown(10.0, p, 3)
        noise = Recording()
        grow_tree(counts, k, b, p, noise, lambda h, d, pp: d % 2 == 0)
        expected = {objective_scale(k, 3, b.eps_prt_level, n) for n in (1, 2, 4)}
        assert set(noise.scales) == expected
        assert len(expected) == 3  # the deeper levels pay for up to min(k, nodes) steps
