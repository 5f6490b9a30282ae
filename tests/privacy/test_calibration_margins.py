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

    @pytest.mark.parametrize("k,nodes", [(1, 1), (3, 5), (16, 16)])
    def test_ties_to_even(self, k: int, nodes: int) -> None:
        # rint rounds ties to even, so a node can gain |a − b| + 1 steps when |a − b| is an odd
        # integer (rint(0.5) = 0, rint(1.5) = 2): more than ceil(|a − b|), within floor(|a − b|) + 1
        # (rounding_steps' docstring), and the level total stays within the margin
        m = min(k, nodes)
        share = [k // m + (1 if j < k % m else 0) for j in range(m)]
        total = 0
        for kj in share:
            d = 2 * kj / G - 1  # Δ_j/g + 2e/g with Δ_j/g = 2kj/g − 17/16 and 2e/g = 1/16 < 1/8
            a = Fraction(1, 2) + 14  # a tie that rounds down (to 14)
            b = a + d  # a tie that rounds up
            steps = int(np.rint(float(b))) - int(np.rint(float(a)))
            assert steps == d + 1 and steps > int(np.ceil(float(d))) and steps <= int(d) + 1
            total += steps
        assert total <= 2 * k / G + rounding_steps(k, nodes)

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


class TestPriveletExactCoefficients:
    """The nominal transform divides by fan-outs: float coefficients of large counts are off
    by many grid steps, so a neighbour's grid values could move by more than the accounting's
    ``|Δc|/g_c + 1`` steps.  The release rounds the exact coefficients instead."""

    @staticmethod
    def _setup():
        from dpcore.estimate import privelet as pv

        axes = (pv.Axis.nominal("n", [np.repeat(np.arange(3), 3)]),)
        plan = pv._class_plan(axes)  # what release() reads (λ: pv._lam_exact)
        g = np.array([0 if k is None else k for k in plan.exponents])[plan.classes]
        base = np.array([2**48 + v for v in (1, 7, 2, 9, 4, 4, 0, 5, 3)], dtype=np.int64)
        return pv, axes, plan, g, base

    @staticmethod
    def _loss(lam, plan, g, u0, u1) -> Fraction:
        loss = Fraction(0)
        for c in np.flatnonzero(np.asarray(u0 != u1)):
            w = plan.weights[plan.classes[c]]
            step = Fraction(2) ** int(g[c])
            loss += abs(int(u1[c]) - int(u0[c])) * step * w / lam
        return loss

    def test_neighbours_within_the_accounting(self) -> None:
        from dpcore.estimate.privelet_exact import exact_grid_units

        pv, axes, plan, g, base = self._setup()
        tfs = [a._tf for a in axes]
        lam = pv._lam_exact(axes, 1.0, 1)
        worst_exact = worst_float = Fraction(0)
        for j in range(base.size):
            other = base.copy()
            other[j] += 1
            u0 = exact_grid_units(base, tfs, plan.classes, plan.exponents)
            u1 = exact_grid_units(other, tfs, plan.classes, plan.exponents)
            worst_exact = max(worst_exact, self._loss(lam, plan, g, u0, u1))
            f0 = np.rint(np.ldexp(pv.forward(base.astype(float), axes), -g))
            f1 = np.rint(np.ldexp(pv.forward(other.astype(float), axes), -g))
            worst_float = max(worst_float, self._loss(lam, plan, g, f0, f1))
        assert worst_exact <= 1
        assert worst_float > 1  # the float path this replaces: the adversarial input is real

    def test_exact_units_match_fractions(self) -> None:
        from dpcore.estimate.privelet_exact import exact_grid_units

        pv, axes, plan, g, base = self._setup()
        u = exact_grid_units(base, [a._tf for a in axes], plan.classes, plan.exponents)
        # the nominal coefficients by hand: root total, group sum − total/3, leaf − group/3
        x = [Fraction(int(v)) for v in base]
        groups = [sum(x[3 * i:3 * i + 3]) for i in range(3)]
        total = sum(groups)
        coeffs = [total] + [s - total / 3 for s in groups] + [x[i] - groups[i // 3] / 3 for i in range(9)]
        for c, (value, kk) in enumerate(zip(coeffs, g.tolist(), strict=True)):
            q = value / Fraction(2) ** kk
            assert int(u[c]) == (2 * q + 1) // 2  # round half up, exactly

    def test_release_rounds_the_exact_coefficients(self, monkeypatch) -> None:
        pv, axes, plan, g, base = self._setup()
        seen = []
        real = pv.exact_grid_units

        def spy(*args, **kw):
            out = real(*args, **kw)
            seen.append(out)
            return out

        monkeypatch.setattr(pv, "exact_grid_units", spy)
        rel = pv.release(base, axes, 1.0, NoiseSource(3))
        assert len(seen) == 1 and np.isfinite(rel.noisy).all()

    def test_many_distinct_fanouts_beyond_int64(self) -> None:
        """Fan-outs 1..60 (as US counties per state): their lcm has 25 digits, beyond int64.  The
        integer transform then runs on Python ints (it raised OverflowError after the charge before),
        and its grid units still equal the exact ones."""
        import math

        from dpcore.estimate import privelet as pv
        from dpcore.estimate.privelet_exact import exact_grid_units

        fans = list(range(1, 61))
        groups = np.repeat(np.arange(len(fans)), fans)
        axes = (pv.Axis.nominal("area", [groups]),)
        assert math.lcm(*fans) >= 2**63
        plan = pv._class_plan(axes)
        g = np.array([0 if k is None else k for k in plan.exponents])[plan.classes]
        x = np.random.default_rng(0).integers(0, 50, groups.size)
        u = exact_grid_units(x, [a._tf for a in axes], plan.classes, plan.exponents)
        xs = [Fraction(int(v)) for v in x]
        sums = [sum(xs[i] for i in np.flatnonzero(groups == j)) for j in range(len(fans))]
        total = sum(sums)
        coeffs = [total] + [s - total / len(fans) for s in sums] + [
            xs[i] - sums[groups[i]] / fans[groups[i]] for i in range(groups.size)]
        for c, (value, kk) in enumerate(zip(coeffs, g.tolist(), strict=True)):
            if plan.exponents[plan.classes[c]] is None:
                continue  # weight +inf: always exactly 0
            assert int(u[c]) == (2 * (value / Fraction(2) ** kk) + 1) // 2
        rel = pv.release(x, axes, 1.0, NoiseSource(3))
        assert np.isfinite(rel.noisy).all() and rel.noisy.shape == x.shape


# ---------------------------------------------------------------------------------------------
# matrix mechanism: fl(Ax) against Ax at very large counts (issue 18, item 3c)
# ---------------------------------------------------------------------------------------------


class _ZeroNoise(NoiseSource):
    """A test double: rounds to the grid as the real source does and adds no noise."""

    def __init__(self) -> None:
        super().__init__(0)

    def gaussian_on_grid(self, values, sigma, granularity_exp):
        v = np.asarray(values, dtype=np.float64)
        return np.ldexp(np.rint(np.ldexp(v, -granularity_exp)), granularity_exp)

    laplace_on_grid = gaussian_on_grid

    def discrete_laplace(self, scale, size):
        return np.zeros(size, dtype=np.int64)


def _matrix_case():
    from dpcore.estimate import matrix_design, matrix_workload

    w = matrix_workload.all_range_workload(8)
    return w, matrix_design.eigen_design(w)  # real-valued entries: the grid path


def _released_centres(w, s, x, monkeypatch) -> np.ndarray:
    """The values the release's noise is added to (``y`` with zero noise, as handed to the solver)."""
    from dpcore.estimate import matrix_release
    from dpcore.estimate.matrix_strategy import Strategy

    seen = []
    solve = Strategy.solve
    with monkeypatch.context() as m:
        m.setattr(Strategy, "solve", lambda self, y: (seen.append(np.array(y)), solve(self, y))[1])
        matrix_release.release(w, s, x, _ZeroNoise(), rho=0.5)
    return seen[-1]


def _exact_units(A: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    return np.array([round(sum(Fraction(a) * Fraction(v) for a, v in zip(row, x, strict=True)) / Fraction(2) ** k)
                     for row in A], dtype=np.int64)


def test_matrix_strategy_answers_move_by_at_most_the_calibrated_sensitivity(monkeypatch) -> None:
    """Adversarial neighbours with counts near 2^36: the release adds noise to round(Ax / 2^k) of
    the exact ``Ax`` (so neighbours' centres differ by at most the effective L2 sensitivity
    ``Δ2 + sqrt(s)·2^k``); rounding ``fl(Ax)`` instead, which is off by ulps of 2^39 (hundreds of
    grid steps), would break that calibration."""
    from dpcore.estimate import matrix_release

    w, s = _matrix_case()
    cal = matrix_release.calibrate(s, rho=0.5)
    k = cal.grid_exponent
    rng = np.random.default_rng(5)
    worst_float = worst = 0.0
    for _ in range(20):
        x = rng.integers(2**36, 2**36 + 2**20, size=8).astype(np.float64)
        j = int(rng.integers(8))
        x2 = x.copy()
        x2[j] += 1
        u, u2 = _exact_units(s.A, x, k), _exact_units(s.A, x2, k)
        for xx, uu in ((x, u), (x2, u2)):
            np.testing.assert_array_equal(_released_centres(w, s, xx, monkeypatch), np.ldexp(uu.astype(float), k))
        worst = max(worst, float(np.linalg.norm((u - u2).astype(float))) * 2.0**k)
        f, f2 = (np.rint(np.ldexp(s.apply(v), -k)).astype(np.int64) for v in (x, x2))
        worst_float = max(worst_float, float(np.linalg.norm((f - f2).astype(float))) * 2.0**k)
    assert worst <= cal.effective_sensitivity
    assert worst_float > cal.effective_sensitivity  # the float path would break the calibration


def test_matrix_exact_units_match_exact_arithmetic() -> None:
    """``grid_units`` equals round(Ax / 2^k) computed with fractions, explicit and Kronecker."""
    from dpcore.estimate import matrix_design, matrix_workload
    from dpcore.estimate.matrix_exact import grid_units

    w, s = _matrix_case()
    cases = [(s, 8), (matrix_design.kron_eigen_design(matrix_workload.range_2d_workload(4, 4)), 16)]
    rng = np.random.default_rng(7)
    for strat, n in cases:
        if strat.factors:  # exact entries of A1 ⊗ A2 (np.kron would round the products)
            F1, F2 = ([[Fraction(a) for a in row] for row in f.A] for f in strat.factors)
            A = [[a * b for a in r1 for b in r2] for r1 in F1 for r2 in F2]
        else:
            A = [[Fraction(a) for a in row] for row in strat.A]
        for scale_bits, k in ((40, -20), (50, -3), (10, -30)):
            x = rng.integers(0, 2**scale_bits, size=n).astype(np.float64)
            exact = [round(sum(a * Fraction(v) for a, v in zip(row, x, strict=True)) / Fraction(2) ** k)
                     for row in A]
            assert grid_units(strat, x, k).tolist() == exact
